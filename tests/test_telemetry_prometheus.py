"""A real Prometheus scrapes the plugin on the fake driver, and every query of the chart's dashboard has data.

Debian's prometheus scrapes /metrics every second with the label ``node`` (as
the chart's ServiceMonitor puts it on every series); a pod holds a chip through
the kubelet's PodResources, so the per-pod panels have a pod to show. Every
panel's query, with the dashboard's ``node`` variable set to the node and to
All, returns data from Prometheus' HTTP API; so does the variable's own query.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from dashboard_queries import dashboard, panel_queries, variable
from fake_dcmi.players import CFakePlayer
from plugin_harness import registered, running_plugin
from prometheus_server import Prometheus, prometheus_binary
from split_nodes import box_910b3, make_host
from telemetry_harness import on_every_chip, scrape_until, telemetry_settings
from waiting import eventually, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from ascend_plugin.testing.pod_resources_standin import PodResourcesStandIn

pytestmark = pytest.mark.anyio

NODE = "atlas-800t-a2-01"
RESOURCE = "huawei.com/Ascend910"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


async def test_every_dashboard_query_returns_data_from_prometheus(
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
        assert app.holdings is not None
        await app.holdings.refresh()
        assert app.http is not None
        prometheus = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{app.http.port}"], {"node": NODE})
        try:
            await anyio.to_thread.run_sync(
                lambda: eventually(prometheus.ready, "prometheus ready", within=60, explain=prometheus.output)
            )
            data = dashboard()
            queries = panel_queries(data)
            node_query = variable(data, "node")["query"]["query"]
            assert node_query == "label_values(machine_npu_nums, node)"

            def nodes() -> list[str]:
                answer = prometheus.get("/api/v1/label/node/values", **{"match[]": "machine_npu_nums"})
                return list(answer["data"]) if answer is not None else []

            def has_data(query: str, what: str) -> list[dict[str, object]]:
                return eventually(lambda: prometheus.query(query), what, within=60, explain=prometheus.output)

            await anyio.to_thread.run_sync(lambda: eventually(nodes, "the node variable's values", within=60))
            assert nodes() == [NODE]
            for chosen in (NODE, ".*"):  # one node, and All
                for title, expr in queries:
                    query = expr.replace("$node", chosen)
                    found = await anyio.to_thread.run_sync(has_data, query, f"data for {title!r}: {query}")
                    assert found, (title, query)
            per_pod = prometheus.query(
                f'avg by (namespace, pod_name) (container_npu_utilization{{node=~"{NODE}"}})'
            )
            assert [series["metric"] for series in per_pod] == [
                {"namespace": "training", "pod_name": "resnet-0"}
            ]
        finally:
            prometheus.stop()
