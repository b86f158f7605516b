"""An Atlas 850 (eight Ascend 950PR, DCMI v2 only) beside the real kubelet.

The C fake answers ``dcmi_init`` with -8255, as a 950's driver does: the plugin speaks DCMI v2. The
chips' logical ids are four off their physical ids, so the test tells the two apart: the kubelet sees
``npu-<physical id>`` under ``huawei.com/npu``, a container gets ``/dev/davinci<logical id>`` and the
UB stack's nodes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chart_harness import ChartRenderer
from cluster import Cluster
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import delete, node_resources, pod, running, seen

from ascend_plugin.testing.simulate_950 import atlas_850, logic_of
from backends.fake import FakeScenario

RESOURCE = "huawei.com/npu"
UB_NODES = ("/dev/uburma/uburma0", "/dev/uburma/uburma1", "/dev/ummu/ummu")


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering = chart.render_file("values-950.yaml")
    node = FakeScenario.model_validate(atlas_850())
    with node_plugin(cluster, rendering, node, tmp_path_factory.mktemp("plugin"), UB_NODES) as running_plugin:
        yield running_plugin


def test_the_node_reports_eight_npus_by_physical_id(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (8, 8), f"{RESOURCE}: 8")
    assert any("DCMI v2" in str(line.get("msg", "")) for line in plugin.lines()), "the API in use is said"
    labels = api.read("v1", "Node", cluster.node)["metadata"]["labels"]  # type: ignore[index]
    assert labels["accelerator"] == "huawei-npu"


def test_a_pod_gets_its_chips_by_logical_id_and_the_ub_nodes(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    api.create(pod("two-npus", {RESOURCE: "2"}))
    running(api, "two-npus")
    inside = seen(api, "two-npus")
    given = sorted(
        int(name[len("davinci") :]) for name in inside.devices() if name[len("davinci") :].isdigit()
    )
    assert len(given) == 2
    allocated = [line for line in plugin.lines() if str(line.get("msg", "")).startswith("allocated npu-")]
    physical = sorted(int(device.split("-")[1]) for device in allocated[-1]["msg"].split()[1].split(","))
    assert given == sorted(logic_of(phy) for phy in physical), (given, physical)
    assert {"uburma", "ummu"} <= set(inside.dev)
    delete(api, "two-npus")
