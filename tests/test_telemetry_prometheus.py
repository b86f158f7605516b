"""A real Prometheus scrapes the plugin on the fake driver, and every query of the chart's dashboard has data.

Debian's prometheus scrapes /metrics every second, once with the label ``node``
(as the chart's ServiceMonitor puts it on every series) and once with no label
at all (a plain scrape job: prometheus.io annotations, kubernetes_sd, static);
a pod holds a chip through the kubelet's PodResources, so the per-pod panels
have a pod to show. The dashboard's variables are expanded as Grafana expands
them (``node`` from the plugin's ``ascend_node_info``, the hidden ``instance``
from the chosen nodes), and every panel's query, for one node and for All,
returns data from Prometheus' HTTP API.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import anyio.to_thread
import pytest
from dashboard_queries import dashboard, panel_queries, variable
from fake_dcmi.players import CFakePlayer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from prometheus_server import Prometheus, prometheus_binary
from split_nodes import box_910b3, make_host
from telemetry_harness import on_every_chip, scrape_until, telemetry_settings
from waiting import eventually, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

NODE = "atlas-800t-a2-01"
RESOURCE = "huawei.com/Ascend910"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


def regex_of(values: list[str]) -> str:
    """A multi-value variable in a regex matcher, as Grafana writes it for Prometheus: (a|b), escaped."""
    return "(" + "|".join(re.escape(value).replace("\\", "\\\\") for value in values) + ")"


@pytest.mark.parametrize(
    "labels", [{"node": NODE}, {}], ids=["the ServiceMonitor's node label", "a plain scrape"]
)
async def test_every_dashboard_query_returns_data_from_prometheus(
    labels: dict[str, str],
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
    tmp_path: Path,
) -> None:
    prometheus_binary()  # skip (or fail, under CI) before anything starts
    c_fake.update(box_910b3({}))
    settings = telemetry_settings(c_fake, plugin_dir, host, pod_resources_socket=pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await anyio.to_thread.run_sync(pod_resources.admit, "training", "resnet-0", RESOURCE, ["Ascend910-1"])
        await scrape_until(app, on_every_chip(app, "npu_chip_info_hbm_used_memory"), "every chip's figures")
        assert app.held.client is not None
        await app.held.refresh()
        assert app.http is not None
        target = f"127.0.0.1:{app.http.port}"
        prometheus = Prometheus(tmp_path / "prometheus", [target], labels)
        host = socket.gethostname()  # the plugin's node without NODE_NAME, as a kubelet names its node
        try:
            await anyio.to_thread.run_sync(
                lambda: eventually(prometheus.ready, "prometheus ready", within=60, explain=prometheus.output)
            )
            data = dashboard()
            queries = panel_queries(data)
            assert variable(data, "node")["query"]["query"] == "label_values(ascend_node_info, node_name)"
            instance_query = variable(data, "instance")["query"]["query"]

            def label_values(label: str, match: str) -> list[str]:
                answer = prometheus.get(f"/api/v1/label/{label}/values", **{"match[]": match})
                return list(answer["data"]) if answer is not None else []

            def has_data(query: str, what: str) -> list[dict[str, object]]:
                return eventually(lambda: prometheus.query(query), what, within=60, explain=prometheus.output)

            nodes = await anyio.to_thread.run_sync(
                lambda: eventually(
                    lambda: label_values("node_name", "ascend_node_info"),
                    "the node variable's values",
                    within=60,
                )
            )
            assert nodes == [host]
            for chosen in (regex_of([host]), ".*"):  # one node, and All
                match = re.fullmatch(r"label_values\((.*), instance\)", instance_query)
                assert match is not None, instance_query
                instances = label_values("instance", match.group(1).replace("$node", chosen))
                assert instances == [target]
                for title, expr in queries:
                    query = expr.replace("$instance", regex_of(instances))
                    found = await anyio.to_thread.run_sync(has_data, query, f"data for {title!r}: {query}")
                    assert found, (title, query)
            on_target = f'instance=~"{regex_of([target])}"'
            per_pod = prometheus.query(
                f"avg by (namespace, pod_name) (container_npu_utilization{{{on_target}}})"
            )
            assert [series["metric"] for series in per_pod] == [
                {"namespace": "training", "pod_name": "resnet-0"}
            ]
        finally:
            prometheus.stop()
