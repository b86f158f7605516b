"""The device plugin beside the real kubelet, API server and scheduler: an 8-chip 910 node.

Each test is one step an operator would see, in order on one cluster: capacity, a pod with two
chips and what its container gets, the kubelet's preferred allocation, a kubelet restart, a plugin
restart under a running pod, a chip fault and its clearing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from chart_harness import ChartRenderer, Rendering
from cluster import Cluster
from node_plugin import NodePlugin, node_plugin, wait_for
from pods import Seen, delete, node_resources, pending_reason, pod, run_pod, running, seen

from backends.fake import FakeChip, FakeScenario

RESOURCE = "huawei.com/Ascend910"
# A first-generation 910 server: two HCCS rings of four chips (0-3, 4-7).
CHIPS = 8
RINGS = ({0, 1, 2, 3}, {4, 5, 6, 7})


def scenario(faulted: frozenset[int] = frozenset()) -> FakeScenario:
    chips = [FakeChip(phy_id=phy, health=2 if phy in faulted else 0) for phy in range(CHIPS)]
    return FakeScenario(chip_name="910ProB", chips=tuple(chips))


@pytest.fixture(scope="module")
def rendering(chart: ChartRenderer) -> Rendering:
    return chart.render_file("values-910.yaml")


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, rendering: Rendering, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    with node_plugin(cluster, rendering, scenario(), tmp_path_factory.mktemp("plugin")) as running_plugin:
        yield running_plugin


def chips_of(ids: str) -> set[int]:
    """Chip numbers of an ``ASCEND_VISIBLE_DEVICES`` value or a list of Ascend910-N IDs."""
    return {int(number) for number in re.findall(r"\d+", ids)}


def test_the_node_reports_every_chip(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (CHIPS, CHIPS), f"{RESOURCE}: {CHIPS}")
    assert plugin.running() is None


def own_chips(inside: Seen) -> set[int]:
    """The chips whose ``/dev/davinci<phy>`` a container was given."""
    return {int(name[len("davinci") :]) for name in inside.devices() if re.fullmatch(r"davinci\d+", name)}


def test_a_pod_gets_exactly_its_two_chips(cluster: Cluster, plugin: NodePlugin) -> None:
    """Device mode (the default without the Ascend Docker Runtime): the nodes, nothing to the env."""
    api = cluster.admin()
    inside = run_pod(api, "two-chips", {RESOURCE: "2"})
    assert len(own_chips(inside)) == 2, inside.dev
    assert {"davinci_manager", "hisi_hdc", "devmm_svm"} <= set(inside.dev)  # the family's shared nodes
    assert "ASCEND_VISIBLE_DEVICES" not in inside.env  # as Huawei's: the env is for the Ascend runtime
    delete(api, "two-chips")


def test_runtime_mode_names_the_chips_for_the_ascend_runtime(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    plugin.restart(ASCEND_DP_ALLOCATE_MODE="runtime")
    inside = run_pod(api, "runtime-two", {RESOURCE: "2"})
    assert len(chips_of(inside.env["ASCEND_VISIBLE_DEVICES"])) == 2
    assert inside.env["ASCEND_RUNTIME_OPTIONS"] == ""
    assert not own_chips(inside), "no Ascend Docker Runtime here: nobody mounts the nodes"
    delete(api, "runtime-two")


def test_cdi_mode_lets_the_runtime_edit_the_container(cluster: Cluster, plugin: NodePlugin) -> None:
    """containerd reads the plugin's CDI spec and adds the nodes it names (the CRI's CDI devices)."""
    api = cluster.admin()
    plugin.restart(ASCEND_DP_ALLOCATE_MODE="cdi")
    inside = run_pod(api, "cdi-two", {RESOURCE: "2"})
    assert len(own_chips(inside)) == 2, inside.dev
    assert "davinci_manager" in inside.dev
    delete(api, "cdi-two")
    plugin.restart(ASCEND_DP_ALLOCATE_MODE="device")


def test_the_kubelet_asks_for_chips_of_one_ring(cluster: Cluster, plugin: NodePlugin) -> None:
    """One chip breaks into a ring, two then go whole to the other (alone, the kubelet picks at random)."""
    api = cluster.admin()
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (CHIPS, CHIPS), "every chip free")
    first = own_chips(run_pod(api, "one-chip", {RESOURCE: "1"}))
    pair = own_chips(run_pod(api, "ring-pair", {RESOURCE: "2"}))
    ring_of_first = next(ring for ring in RINGS if first <= ring)
    assert any(pair <= ring for ring in RINGS), f"{pair} spans both rings"
    assert not pair & ring_of_first, f"{pair} went to the ring {first} already broke into"
    delete(api, "one-chip")
    delete(api, "ring-pair")


def test_a_kubelet_restart_registers_again(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    registered = f"registered {RESOURCE} with the kubelet"
    registrations = plugin.count(registered)
    cluster.stop_kubelet()
    cluster.start_kubelet()
    wait_for(lambda: plugin.count(registered) > registrations, "the plugin registered again")
    wait_for(
        lambda: node_resources(api, cluster.node, RESOURCE) == (CHIPS, CHIPS),
        "capacity back after the restart",
    )


def test_a_plugin_restart_leaves_running_pods_alone(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    api.create(pod("survivor", {RESOURCE: "1"}))
    before = running(api, "survivor")
    plugin.restart()
    after = running(api, "survivor")
    status_before = before["status"]["containerStatuses"][0]
    status_after = after["status"]["containerStatuses"][0]
    assert status_after["restartCount"] == 0
    assert status_after["containerID"] == status_before["containerID"]
    delete(api, "survivor")


def test_a_chip_fault_takes_it_out_and_clearing_brings_it_back(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    plugin.update(scenario(faulted=frozenset({5})))
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (CHIPS, CHIPS - 1), "allocatable 7")
    api.create(pod("all-left", {RESOURCE: str(CHIPS - 1)}))
    running(api, "all-left")
    assert 5 not in own_chips(seen(api, "all-left"))
    api.create(pod("one-more", {RESOURCE: "1"}))
    wait_for(
        lambda: "Insufficient" in pending_reason(api, "one-more"), "the scheduler refuses an eighth chip"
    )
    delete(api, "all-left")
    plugin.update(scenario())
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (CHIPS, CHIPS), "allocatable 8 again")
    running(api, "one-more")
    delete(api, "one-more")


def test_the_plugin_exits_cleanly_on_sigterm(plugin: NodePlugin) -> None:
    assert plugin.stop() == 0
    plugin.start()
