"""The DRA driver beside the real kubelet, scheduler, controller manager and API server.

An 8-chip 910B3 node with ``serve: dra`` and ``vnpu: dynamic``. The real scheduler allocates the
claims from the driver's ResourceSlices, the controller manager makes them from the pods'
templates and deletes them with the pods, the real kubelet prepares them and containerd applies
the claims' CDI specs. On 1.37 the partitions are kept; on the 1.34 baseline (partitionable devices
alpha and off) the API server drops them, the driver notices, and whole chips still work.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api import Api
from chart_harness import ChartRenderer
from cluster import Cluster
from devices import NULL
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import NAMESPACE, delete, pending_reason, pod, running, seen

from backends.fake import FakeChip, FakeScenario

DRIVER = "npu.huawei.com"
WHOLE_CLASS = f"ascend910.{DRIVER}"
PARTITION_CLASS = f"ascend910-vir05-1c-16g.{DRIVER}"
RESTART = "8C03A000"  # RestartNPU in Huawei's built-in faultCode.json
V1 = "resource.k8s.io/v1"


def scenario(faulted: frozenset[int] = frozenset()) -> FakeScenario:
    chips = [FakeChip(phy_id=phy, fault_codes=(RESTART,) if phy in faulted else ()) for phy in range(8)]
    return FakeScenario(chip_name="910B3", memory_mb=65536, vdev_node_dir=Path("/dev"), chips=tuple(chips))


def partitions_kept(version: str) -> bool:
    """Partitions, device taints and the pods' device health are beta, and on, from 1.36."""
    return tuple(int(part) for part in version.split(".")[:2]) >= (1, 36)


@contextlib.contextmanager
def vnpu_nodes_removed() -> Iterator[None]:
    """The fake driver makes /dev/vdavinci<N> for the vNPUs it creates; none may outlive the module."""
    try:
        yield
    finally:
        for node in Path("/dev").glob("vdavinci*"):
            if node.is_char_device() and node.stat().st_rdev == NULL:
                node.unlink()


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering = chart.render_file(
        "values-910.yaml", {"serve": "dra", "settings": {"vnpu": "dynamic", "draTaintEffect": "NoSchedule"}}
    )
    with (
        vnpu_nodes_removed(),
        node_plugin(cluster, rendering, scenario(), tmp_path_factory.mktemp("plugin")) as p,
    ):
        yield p


def devices(api: Api, node: str) -> dict[str, dict[str, Any]]:
    """The devices of the driver's pool on ``node``, as the API server stored them, by name."""
    found = {}
    for piece in api.list(V1, "ResourceSlice", fieldSelector=f"spec.nodeName={node}"):
        if piece["spec"]["driver"] == DRIVER:
            found.update({device["name"]: device for device in piece["spec"].get("devices", [])})
    return found


def claim_template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "npu", "exactly": {"deviceClassName": device_class}}]}}
        },
    }


def allocated_device(api: Api, pod_name: str) -> str:
    """The device the scheduler allocated to the pod's one claim."""
    found = api.read("v1", "Pod", pod_name, NAMESPACE)
    assert found is not None
    claim_name = found["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = api.read(V1, "ResourceClaim", claim_name, NAMESPACE)
    assert claim is not None
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1, results
    assert results[0]["driver"] == DRIVER, results
    return str(results[0]["device"])


def with_one_chip(api: Api, pod_name: str) -> tuple[str, dict[str, Any]]:
    """A running pod with a claim for one whole chip: the device allocated to it, and the pod."""
    api.apply(claim_template("one-npu", WHOLE_CLASS))
    api.create(pod(pod_name, claim_templates={"npu": "one-npu"}))
    found = running(api, pod_name)
    return allocated_device(api, pod_name), found


def vnpus(plugin: NodePlugin) -> list[str]:
    return sorted(path.name for path in Path("/dev").glob("vdavinci*"))


def test_the_slices_are_accepted(cluster: Cluster, plugin: NodePlugin, kubernetes_version: str) -> None:
    api = cluster.admin()
    published = wait_for(
        lambda: len(devices(api, cluster.node)) >= 8 and devices(api, cluster.node), "the slices"
    )
    assert {f"npu-{phy}" for phy in range(8)} <= set(published)
    split = [name for name in published if re.fullmatch(r"npu-\d+-.+", name)]
    if partitions_kept(kubernetes_version):
        assert split, "the 1.36+ API server keeps partitions"
        assert all(device.get("consumesCounters") for name, device in published.items() if name in split)
    else:
        assert not split, "an API server without partitionable devices is published whole chips only"
        assert any("DRAPartitionableDevices" in json.dumps(line) for line in plugin.lines()), "said once"


def test_a_claim_for_one_chip_runs_with_its_cdi_device(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    device, _ = with_one_chip(api, "dra-one")
    phy = int(device.split("-")[1])
    inside = seen(api, "dra-one")
    assert [name for name in inside.devices() if re.fullmatch(r"davinci\d+", name)] == [f"davinci{phy}"]
    assert "davinci_manager" in inside.dev
    delete(api, "dra-one")
    wait_for(lambda: not api.list(V1, "ResourceClaim", NAMESPACE), "the claim deleted with its pod")


def test_a_partition_claim_makes_a_vnpu_that_goes_with_the_pod(
    cluster: Cluster, plugin: NodePlugin, kubernetes_version: str
) -> None:
    api = cluster.admin()
    assert vnpus(plugin) == []
    api.apply(claim_template("one-vnpu", PARTITION_CLASS))
    api.create(pod("dra-vnpu", claim_templates={"npu": "one-vnpu"}))
    if not partitions_kept(kubernetes_version):  # no partition is published: the scheduler finds none
        wait_for(lambda: pending_reason(api, "dra-vnpu"), "the scheduler says why it cannot place the pod")
        assert vnpus(plugin) == [], "nothing made"
        delete(api, "dra-vnpu")
        return
    running(api, "dra-vnpu")
    assert re.fullmatch(r"npu-\d+-vir05-1c-16g-\d+", allocated_device(api, "dra-vnpu"))
    made = vnpus(plugin)
    assert len(made) == 1, made
    inside = seen(api, "dra-vnpu")
    assert f"davinci{made[0][len('vdavinci') :]}" in inside.dev  # /dev/vdavinci<N> as /dev/davinci<N>
    delete(api, "dra-vnpu")
    wait_for(lambda: vnpus(plugin) == [], "the vNPU destroyed when the pod went")


def test_a_chip_fault_taints_the_device_and_the_pod_sees_it(
    cluster: Cluster, plugin: NodePlugin, kubernetes_version: str
) -> None:
    """1.36+: the device stays, tainted, and the pod's status shows it unhealthy (the driver's health
    stream, ResourceHealthStatus). Before, the API server drops taints: the device leaves the slice."""
    api = cluster.admin()
    device, _ = with_one_chip(api, "dra-held")
    phy = int(device.split("-")[1])
    plugin.update(scenario(faulted=frozenset({phy})))
    if not partitions_kept(kubernetes_version):  # DRADeviceTaints and ResourceHealthStatus are off
        wait_for(lambda: device not in devices(api, cluster.node), f"{device} out of the slice")
        plugin.update(scenario())
        wait_for(lambda: device in devices(api, cluster.node), f"{device} back")
        running(api, "dra-held")
        delete(api, "dra-held")
        return
    tainted = wait_for(lambda: devices(api, cluster.node)[device].get("taints"), f"{device} tainted")
    assert [(taint["key"], taint["effect"]) for taint in tainted] == [(f"{DRIVER}/unhealthy", "NoSchedule")]

    def pod_says_unhealthy() -> bool:
        found = api.read("v1", "Pod", "dra-held", NAMESPACE) or {}
        for status in found.get("status", {}).get("containerStatuses", []):
            for resource in status.get("allocatedResourcesStatus", []):
                if any(entry.get("health") == "Unhealthy" for entry in resource.get("resources", [])):
                    return True
        return False

    wait_for(pod_says_unhealthy, "the pod's status shows its device unhealthy")
    plugin.update(scenario())
    wait_for(lambda: not devices(api, cluster.node)[device].get("taints"), f"{device} untainted")
    delete(api, "dra-held")


def test_a_kubelet_restart_does_not_prepare_a_claim_twice(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    _, before = with_one_chip(api, "dra-kept")
    prepared = [
        line for line in plugin.lines() if str(line.get("msg", "")).startswith("prepared ResourceClaim")
    ]
    cluster.stop_kubelet()
    cluster.start_kubelet()
    after = running(api, "dra-kept")
    again = [line for line in plugin.lines() if str(line.get("msg", "")).startswith("prepared ResourceClaim")]
    assert again == prepared, (
        "the claim was prepared once; the restarted kubelet was answered from the checkpoint"
    )
    old, new = before["status"]["containerStatuses"][0], after["status"]["containerStatuses"][0]
    assert (new["containerID"], new["restartCount"]) == (old["containerID"], 0)
    delete(api, "dra-kept")
