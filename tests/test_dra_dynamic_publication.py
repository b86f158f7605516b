"""vnpu=dynamic, share_count and taints under serve=dra, against API servers of 1.34 to 1.37.

Where the server keeps counters (1.36+, or a gate turned on), every chip is
published whole and as partitions, in the 1.35+ layout, and every slice is
valid for 1.36 and 1.37. Where it drops them (1.34 and 1.35 by default) or
refuses the layout (1.34 with the gate on), the chips are published whole
only, and the reason is said once: in the log, in /readyz. A server that stops
keeping them later is caught at the next write, before the pool is complete.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dra_harness import (
    DRIVER,
    DUO_SERVER,
    NODE,
    DraNode,
    device_names,
    make_dra_node,
    registered,
    running_driver,
    validated,
)
from fake_apiserver import FakeApiServer
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.dra import slices as slices_module
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.resource_api import CONSUMABLE_CAPACITY, DEVICE_TAINTS, PARTITIONS

pytestmark = pytest.mark.anyio

EIGHT = [f"npu-{phy}" for phy in range(8)]
# An A2 server's 910B3 (20 AI cores, 64 GiB): the whole chip, four vir05_1c_16g, two vir10_3c_32g.
PER_CHIP = ["", "-vir05-1c-16g-0", "-vir05-1c-16g-1", "-vir05-1c-16g-2", "-vir05-1c-16g-3"]
PER_CHIP += ["-vir10-3c-32g-0", "-vir10-3c-32g-1"]
SPLIT = [f"npu-{phy}{suffix}" for phy in range(8) for suffix in PER_CHIP]
# Every place each template fits (the layout these tests check), not the default two of each.
DYNAMIC: dict[str, Any] = {"vnpu": "dynamic", "dra_partition_places": 0}


def ours(apiserver: FakeApiServer) -> list[dict[str, Any]]:
    return apiserver.slices(DRIVER, NODE)


def counter_sets(apiserver: FakeApiServer) -> list[str]:
    return [s["name"] for slice_ in ours(apiserver) for s in slice_["spec"].get("sharedCounters") or []]


def said(caplog: pytest.LogCaptureFixture, gate: str) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == "ascend_plugin.faces.dra.slices" and getattr(record, "feature", None) == gate
    ]


def in_sync(app: PluginApp) -> bool:
    return app.dra is not None and app.dra.slices is not None and app.dra.slices.in_sync


@pytest.mark.parametrize(("version", "gates"), [("1.36", {}), ("1.37", {}), ("1.35", {PARTITIONS: True})])
async def test_where_the_server_keeps_counters_chips_are_published_whole_and_as_partitions(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    version: str,
    gates: dict[str, bool],
) -> None:
    apiserver.kube_version = version
    apiserver.gates.update(gates)
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC)) as app:
        await until(
            lambda: sorted(device_names(ours(apiserver))) == sorted(SPLIT), "the chips and partitions"
        )
        await until(lambda: in_sync(app), "in sync")
        slices = ours(apiserver)
        assert app.dra is not None
        assert app.dra.notes == []
    validated(slices)
    assert counter_sets(apiserver) == [f"npu-{phy}-counters" for phy in range(8)]
    kinds = Counter("counters" if s["spec"].get("sharedCounters") else "devices" for s in slices)
    assert kinds == {"counters": 1, "devices": 1}, "8 sets fill one slice; 56 devices one more"
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    assert len({s["spec"]["pool"]["generation"] for s in slices}) == 1


@pytest.mark.parametrize("version", ["1.34", "1.35"])
async def test_where_the_server_drops_counters_chips_are_whole_only_and_it_is_said_once(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
    version: str,
) -> None:
    apiserver.kube_version = version
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC, http_address="")) as app:
        await wait_for(dra_kubelet, registered, "registered")
        await until(lambda: device_names(ours(apiserver)) == EIGHT, "whole chips")
        await until(lambda: in_sync(app), "in sync")
        await until(lambda: app.readiness().ok, "ready")
        detail = app.readiness().detail
        dra_node.set_faults({2: ["80E01801"]})
        await until(lambda: "npu-2" not in device_names(ours(apiserver)), "npu-2 left")
    (record,) = said(caplog, PARTITIONS)
    assert record.levelno == logging.WARNING, "vnpu=dynamic asked for them"
    assert "drops sharedCounters and consumesCounters" in record.getMessage()
    assert "DRAPartitionableDevices" in detail
    sent = [r.body for r in apiserver.requests_of("create", "resourceslices")]
    sent += [r.body for r in apiserver.requests_of("update", "resourceslices")]
    assert not any(body["spec"].get("sharedCounters") for body in sent), "only dry runs carried counters"
    assert counter_sets(apiserver) == []


async def test_a_gate_turned_on_later_is_found_and_the_partitions_follow_without_a_restart(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server is asked again about a feature it did not keep: an operator enables the gate, no restart."""
    monkeypatch.setattr(slices_module, "FEATURE_RECHECK", 0.2)
    caplog.set_level(logging.INFO, logger="ascend_plugin.faces.dra.slices")
    apiserver.kube_version = "1.35"
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC, http_address="")) as app:
        await until(lambda: device_names(ours(apiserver)) == EIGHT and in_sync(app), "whole chips")
        assert app.dra is not None
        assert app.dra.notes != []
        apiserver.gates[PARTITIONS] = True
        await until(lambda: sorted(device_names(ours(apiserver))) == sorted(SPLIT), "the partitions")
        await until(lambda: in_sync(app), "in sync")
        assert app.dra.notes == []
        validated(ours(apiserver))
    taken, given = said(caplog, PARTITIONS)
    assert "drops sharedCounters and consumesCounters" in taken.getMessage()
    assert "keeps sharedCounters and consumesCounters now" in given.getMessage()


async def test_1_34_with_the_gate_on_refuses_the_layout_and_chips_are_whole_only(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.gates[PARTITIONS] = True
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC)) as app:
        await until(lambda: device_names(ours(apiserver)) == EIGHT, "whole chips")
        await until(lambda: in_sync(app), "in sync")
    (record,) = said(caplog, PARTITIONS)
    assert "refuses ResourceSlices with sharedCounters and consumesCounters" in record.getMessage()
    assert "must reference a counterSet defined in the ResourceSlice sharedCounters" in record.getMessage(), (
        "the server's own reason"
    )


async def test_a_server_that_stops_keeping_counters_is_caught_before_the_pool_is_complete(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC)) as app:
        await until(lambda: sorted(device_names(ours(apiserver))) == sorted(SPLIT), "partitions")
        apiserver.gates[PARTITIONS] = False  # downgraded: new objects lose the fields
        first = apiserver.version
        apiserver.wipe_slices(NODE)  # as a restarting kubelet does: the slices are created anew
        await until(lambda: device_names(ours(apiserver)) == EIGHT, "whole chips again")
        await until(lambda: in_sync(app), "in sync")
    (record,) = said(caplog, PARTITIONS)
    assert "from ResourceSlice" in record.getMessage()
    complete = [
        change.object
        for change in apiserver.history
        if change.version > first and change.resource == "resourceslices" and change.type != "DELETED"
    ]
    # No generation was ever complete with partitions whose counters the server had dropped.
    for generation in {s["spec"]["pool"]["generation"] for s in complete}:
        of_it = {s["metadata"]["name"]: s for s in complete if s["spec"]["pool"]["generation"] == generation}
        devices = [d for s in of_it.values() for d in s["spec"].get("devices") or []]
        if any("-vir" in d["name"] for d in devices):
            assert len(of_it) < of_it[next(iter(of_it))]["spec"]["pool"]["resourceSliceCount"]


async def test_shared_chips_where_the_server_keeps_consumable_capacity(
    short_tmp: Path, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet_for: Any
) -> None:
    node = make_dra_node(short_tmp / "duo", DUO_SERVER)
    await dra_kubelet_for(node)
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    async with running_driver(node.settings(kubeconfig, share_count=4)):
        await until(lambda: len(device_names(ours(apiserver))) == 4, "four shared chips")
        await until(
            lambda: all(d.get("allowMultipleAllocations") for d in devices(apiserver).values()), "shared"
        )
    device = devices(apiserver)["npu-0"]
    assert device["capacity"]["shares"]["value"] == "4"
    assert device["attributes"]["shareCount"] == {"int": 4}
    validated(ours(apiserver))


async def test_without_consumable_capacity_shared_chips_are_published_whole(
    short_tmp: Path,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet_for: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = make_dra_node(short_tmp / "duo", DUO_SERVER)
    await dra_kubelet_for(node)
    apiserver.add_node(NODE)
    async with running_driver(node.settings(kubeconfig, share_count=4)) as app:
        await until(lambda: device_names(ours(apiserver)) == [f"npu-{phy}" for phy in range(4)], "whole")
        await until(lambda: in_sync(app), "in sync")
    assert not any("allowMultipleAllocations" in d for d in devices(apiserver).values())
    (record,) = said(caplog, CONSUMABLE_CAPACITY)
    assert record.levelno == logging.WARNING


async def test_by_default_taints_are_kept_where_the_server_keeps_them_partitions_with_their_chip(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, **DYNAMIC)):
        await until(lambda: sorted(device_names(ours(apiserver))) == sorted(SPLIT), "partitions")
        dra_node.set_faults({5: ["80E01801"]})
        await until(lambda: "taints" in devices(apiserver)["npu-5"], "npu-5 tainted")
        tainted = {name for name, device in devices(apiserver).items() if device.get("taints")}
        await wait_for(
            dra_kubelet,
            lambda k: (
                k.drivers[DRIVER].health.get((NODE, "npu-5-vir10-3c-32g-1")) is not None
                and k.drivers[DRIVER].health[(NODE, "npu-5-vir10-3c-32g-1")].health == "UNHEALTHY"
            ),
            "the partitions' health reported with their chip's",
        )
    assert tainted == {f"npu-5{suffix}" for suffix in PER_CHIP}
    validated(ours(apiserver))


async def test_where_taints_are_dropped_an_unhealthy_chip_leaves_and_nothing_is_said_by_default(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin.faces.dra.slices")
    apiserver.add_node(NODE)  # 1.34: taints dropped
    async with running_driver(dra_node.settings(kubeconfig)):
        await until(lambda: device_names(ours(apiserver)) == EIGHT, "published")
        dra_node.set_faults({5: ["80E01801"]})
        await until(lambda: "npu-5" not in device_names(ours(apiserver)), "npu-5 left")
    assert [r.levelno for r in said(caplog, DEVICE_TAINTS)] == [logging.INFO], "the default: no warning"


def devices(apiserver: FakeApiServer) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for slice_ in ours(apiserver) for d in slice_["spec"].get("devices") or []}
