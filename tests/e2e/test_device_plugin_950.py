"""An Atlas 850 (eight Ascend 950PR, DCMI v2 only) beside the real kubelet.

The C fake answers ``dcmi_init`` with -8255, as a 950's driver does: the plugin speaks DCMI v2. The
chips' logical ids are four off their physical ids, so the test tells the two apart: the kubelet sees
``npu-<physical id>`` under ``huawei.com/npu``, a container gets ``/dev/davinci<logical id>`` and the
UB stack's nodes. A ``huawei.com/Ascend910`` an older plugin left in the node's status (put there by
an administrator before the plugin starts) is removed by the plugin, through the chart's RBAC and its
admission policy, which lets it remove nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api import Api, ApiError
from chart_harness import ChartRenderer
from cluster import Cluster
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import delete, node_resources, pod, running, seen

from ascend_plugin.faces.kube.stale_resources import REMOVED_REASON
from ascend_plugin.testing.simulate_950 import atlas_850, logic_of
from backends.fake import FakeScenario

RESOURCE = "huawei.com/npu"
UB_NODES = ("/dev/uburma/uburma0", "/dev/uburma/uburma1", "/dev/ummu/ummu")
STALE = "huawei.com/Ascend910"
JSON_PATCH = "application/json-patch+json"


def status_patch(api: Api, node: str, operations: list[dict[str, str]]) -> object:
    return api.request("PATCH", f"/api/v1/nodes/{node}/status", operations, content_type=JSON_PATCH)


def leftover(api: Api, node: str) -> dict[str, str]:
    """Where the node's status still lists ``STALE``: {"capacity": "8", ...}."""
    status = api.read("v1", "Node", node)["status"]  # type: ignore[index]
    return {
        part: status[part][STALE] for part in ("capacity", "allocatable") if STALE in status.get(part, {})
    }


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering = chart.render_file("values-950.yaml")
    node = FakeScenario.model_validate(atlas_850())
    # What a plugin that named the 950's chips huawei.com/Ascend910 left behind.
    left = [
        {"op": "add", "path": f"/status/{part}/huawei.com~1Ascend910", "value": "8"}
        for part in ("capacity", "allocatable")
    ]
    status_patch(cluster.admin(), cluster.node, left)
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


def test_a_leftover_ascend910_is_removed_from_the_node(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    wait_for(lambda: not leftover(api, cluster.node), f"{STALE} gone from capacity and allocatable")
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (8, 8), f"{RESOURCE}: 8 stays")
    removed = [line for line in plugin.lines() if "older family's plugin left" in str(line.get("msg", ""))]
    assert [line["msg"] for line in removed] == [
        f"node {cluster.node}: removed from its status what an older family's plugin left: "
        f"{STALE} (capacity 8, allocatable 8)"
    ]
    events = wait_for(
        lambda: [e for e in api.list("v1", "Event", "default") if e.get("reason") == REMOVED_REASON],
        "the node Event",
    )
    assert events[0]["involvedObject"]["name"] == cluster.node
    assert not [line for line in plugin.lines() if "403" in str(line.get("msg", ""))], "no refusal"


def test_through_the_status_the_plugin_removes_nothing_else(cluster: Cluster, plugin: NodePlugin) -> None:
    """The chart's admission policy: the plugin's own token may remove the leftover, and only it."""
    api = cluster.admin()
    as_plugin = api.as_user(plugin._token())
    npu = "/status/capacity/huawei.com~1npu"
    for what, operations in {
        "the plugin's own resource": [{"op": "remove", "path": npu}],
        "a changed capacity": [{"op": "replace", "path": npu, "value": "16"}],
        "the leftover put back": [
            {"op": "add", "path": "/status/capacity/huawei.com~1Ascend910", "value": "8"}
        ],
        "a condition": [{"op": "remove", "path": "/status/conditions"}],
    }.items():
        with pytest.raises(ApiError) as refused:
            status_patch(as_plugin, cluster.node, operations)
        assert refused.value.status == 403, (what, refused.value)
        assert "changes nothing in the status of its Node but remove huawei.com/Ascend910" in str(
            refused.value.message
        ), what
    assert node_resources(api, cluster.node, RESOURCE) == (8, 8)
