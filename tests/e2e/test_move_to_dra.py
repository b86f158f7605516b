"""A node moved from the device plugin to DRA while a pod holds chips, on the real kubelet (docs/dra.md).

The chart runs ``serve: by-node-label``: the node's label picks the DaemonSet. A training pod holds
two chips through the device plugin; the node is labelled for DRA, and the DRA driver replaces the
device plugin on it. The pod keeps running and keeps its chips; the driver publishes every other chip
and none of its two until it goes (the kubelet's PodResources names them); claims get the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from chart_harness import ChartRenderer
from cluster import Cluster
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import NAMESPACE, delete, node_resources, pending_reason, pod, running, seen

from backends.fake import FakeChip, FakeScenario

RESOURCE = "huawei.com/Ascend910"
DRIVER = "npu.huawei.com"
V1 = "resource.k8s.io/v1"
SERVE_LABEL = "ascend-device-plugin.io/serve"


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering = chart.render_file("values-910.yaml", {"serve": "by-node-label"})
    node = FakeScenario(chip_name="910B3", memory_mb=65536, chips=tuple(FakeChip(phy_id=p) for p in range(8)))
    with node_plugin(cluster, rendering, node, tmp_path_factory.mktemp("plugin")) as running_plugin:
        yield running_plugin


def published(cluster: Cluster) -> set[int]:
    api = cluster.admin()
    names = {
        device["name"]
        for piece in api.list(V1, "ResourceSlice", fieldSelector=f"spec.nodeName={cluster.node}")
        if piece["spec"]["driver"] == DRIVER
        for device in piece["spec"].get("devices", [])
    }
    return {int(name.split("-")[1]) for name in names if re.fullmatch(r"npu-\d+", name)}


def claim_template() -> dict[str, object]:
    request = {"name": "npu", "exactly": {"deviceClassName": f"ascend910.{DRIVER}"}}
    return {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-npu", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def test_a_pod_keeps_its_chips_and_the_driver_offers_only_the_others(
    cluster: Cluster, plugin: NodePlugin
) -> None:
    api = cluster.admin()
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (8, 8), "the device plugin serving 8")
    api.create(pod("training", {RESOURCE: "2"}))
    before = running(api, "training")
    held = {int(name[len("davinci") :]) for name in seen(api, "training").devices() if name[7:].isdigit()}
    assert len(held) == 2

    # The operator labels the node: the device plugin's pod goes, the DRA driver's comes.
    api.request(
        "PATCH",
        f"/api/v1/nodes/{cluster.node}",
        {"metadata": {"labels": {SERVE_LABEL: "dra"}}},
        content_type="application/merge-patch+json",
    )
    plugin.restart(ASCEND_DP_SERVE="dra")
    wait_for(lambda: published(cluster) == set(range(8)) - held, f"every chip but {sorted(held)} published")
    after = running(api, "training")
    assert (
        after["status"]["containerStatuses"][0]["containerID"]
        == before["status"]["containerStatuses"][0]["containerID"]
    )

    api.apply(claim_template())
    for number in range(6):
        api.create(pod(f"claim-{number}", claim_templates={"npu": "one-npu"}))
    for number in range(6):
        running(api, f"claim-{number}")
    api.create(pod("claim-7", claim_templates={"npu": "one-npu"}))
    wait_for(lambda: pending_reason(api, "claim-7"), "the seventh claim waits: two chips are the pod's")

    delete(api, "training")
    wait_for(lambda: published(cluster) == set(range(8)), "its chips published once the pod went")
    running(api, "claim-7")
