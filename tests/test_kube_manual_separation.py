"""ManuallySeparateNPU in the device-info ConfigMap: written, read back after a restart, released by hand.

The fault policy escalates a chip (its built-in FaultFrequency: 80E18005 three
times a day), the inventory carries its judgements (:class:`kube_harness.Judged`
stands in for the health monitor), and the publisher writes to the loopback API
server through the real kubernetes-asyncio client; operators' edits are made
on the server, as ``kubectl edit`` would.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fault_policy_harness import START, Node, configured
from kube_harness import NODE, Judged, make_inventory, running
from waiting import until

from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher
from ascend_plugin.faces.kube.events import NodeEvents
from ascend_plugin.faces.kube.publishers import EVENT_NAMESPACE
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

NAMESPACE, NAME = "kube-system", f"mindx-dl-deviceinfo-{NODE}"
RECURRING = 0x80E18005  # built in: three times a day -> ManuallySeparateNPU, no release window
REASON = {
    "upgrade_time": round(START * 1000),
    "fault_code": "80e18005",
    "fault_level": "ManuallySeparateNPU",
    "upgrade_type": "FaultFrequency",
}


def a_910_node(short_tmp: Path) -> Inventory:
    return make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1))


def separated(short_tmp: Path, node: Node | None = None) -> tuple[Inventory, Node, Judged]:
    """A 910 node of two chips whose chip 1 the policy has separated (80E18005 three times), judged."""
    inventory, node = a_910_node(short_tmp), node or Node()
    for _ in range(3):
        node.raised(1, RECURRING)
        node.cleared(1, RECURRING)
    judged = Judged(inventory, node.policy)
    judged.judge()
    return inventory, node, judged


def configmap_calls(apiserver: FakeApiServer, since: int) -> list[str]:
    """The verbs of the calls on ConfigMaps since request ``since``, watches left out."""
    return [r.verb for r in apiserver.requests[since:] if r.resource == "configmaps" and r.verb != "watch"]


def written_since(apiserver: FakeApiServer, since: int) -> bool:
    """Whether a ConfigMap update succeeded since request ``since`` (not one of an earlier plugin's)."""
    return any(
        r.verb == "update" and r.resource == "configmaps" and r.status == 200
        for r in apiserver.requests[since:]
    )


async def named(apiserver: FakeApiServer) -> None:
    """Wait until the ConfigMap names chip 1 in ManuallySeparateNPU."""
    await until(lambda: data(apiserver).get("ManuallySeparateNPU") == "Ascend910-1", "the separation written")


def data(apiserver: FakeApiServer) -> dict[str, str]:
    configmap = apiserver.get("configmaps", NAME, NAMESPACE)
    return dict(configmap["data"]) if configmap is not None else {}


def device_list(apiserver: FakeApiServer) -> dict[str, str]:
    listed: dict[str, str] = json.loads(data(apiserver)["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
    return listed


def edit(apiserver: FakeApiServer, **keys: str) -> None:
    """Change keys of the ConfigMap by hand."""
    configmap = apiserver.get("configmaps", NAME, NAMESPACE)
    assert configmap is not None
    configmap["data"].update(keys)
    apiserver.put("configmaps", configmap)


def publisher(kube: Kube, inventory: Inventory, node: Node) -> DeviceInfoPublisher:
    return DeviceInfoPublisher(kube, inventory, NAMESPACE, NAME, 300.0, policy=node.policy)


def posting_events(kube: Kube, inventory: Inventory, node: Node) -> Callable[[], Awaitable[None]]:
    """The node events part, as run_kube runs it: the releases of ``node``'s policy posted as Events."""
    events = NodeEvents(kube, NODE, inventory.table, EVENT_NAMESPACE)
    return lambda: events.serve(inventory, node.policy)


def release_events(apiserver: FakeApiServer) -> list[dict[str, Any]]:
    return [event for event in apiserver.events() if event["reason"] == "NPUEscalationReleased"]


async def test_a_separated_chip_is_named_with_its_reason_in_huaweis_shape(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory, node, _ = separated(short_tmp)
    async with running(publisher(kube, inventory, node).run):
        await named(apiserver)
        # The server stores the write before the publisher hears its answer and tells the policy.
        await until(lambda: node.policy.chip(1).separation_written, "the write confirmed to the policy")
    written = data(apiserver)
    assert written["UpgradeFaultReason"] == (
        '{"Ascend910-1":[{"upgrade_time":1767225600000,"fault_code":"80e18005",'
        '"fault_level":"ManuallySeparateNPU","upgrade_type":"FaultFrequency"}]}'
    )
    listed = device_list(apiserver)
    assert (listed["huawei.com/Ascend910"], listed["huawei.com/Ascend910-Unhealthy"]) == (
        "Ascend910-0",
        "Ascend910-1",
    )
    [element] = json.loads(listed["huawei.com/Ascend910-Fault"])
    assert (element["npu_name"], element["fault_type"], element["fault_handling"]) == (
        "Ascend910-1",
        "CardUnhealthy",
        "ManuallySeparateNPU",
    )
    # The code cleared; the escalation still names it, with the time it escalated.
    assert element["fault_time_and_level_map"] == {
        "80E18005": {"fault_time": 1767225600000, "fault_level": "ManuallySeparateNPU"}
    }
    assert node.policy.chip(1).separation_written


async def test_a_separation_survives_a_restart_of_the_plugin(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory, node, _ = separated(short_tmp)
    async with running(publisher(kube, inventory, node).run):
        await named(apiserver)

    # A new plugin: a fresh inventory and policy, nothing observed; only the ConfigMap remembers.
    before = len(apiserver.requests)
    restarted, fresh = a_910_node(short_tmp), Node()
    Judged(restarted, fresh.policy).judge()
    assert fresh.policy.manually_separated() == ()
    async with running(publisher(kube, restarted, fresh).run):
        await until(lambda: fresh.policy.manually_separated() == (1,), "the separation read back")
        await until(lambda: not restarted.chips()[1].healthy, "the chip judged unhealthy again")
        await until(lambda: written_since(apiserver, before), "a write of the new plugin")
    judged = restarted.chips()[1].health.judgement
    assert judged is not None
    assert (judged.level, judged.manually_separated) == (FaultLevel.ManuallySeparateNPU, True)
    assert json.loads(data(apiserver)["UpgradeFaultReason"]) == {"Ascend910-1": [REASON]}
    assert data(apiserver)["ManuallySeparateNPU"] == "Ascend910-1"
    # The new plugin read the ConfigMap before it wrote anything over it.
    calls = configmap_calls(apiserver, before)
    assert calls.index("get") < calls.index("update")


async def test_what_cannot_be_read_back_is_named_and_the_rest_restored(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.put(
        "configmaps",
        {
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {"ManuallySeparateNPU": "Ascend910-1, NPU-7,Ascend910-9", "UpgradeFaultReason": "{oops"},
        },
    )
    inventory, node = a_910_node(short_tmp), Node()
    Judged(inventory, node.policy).judge()
    async with running(publisher(kube, inventory, node).run):
        await until(lambda: data(apiserver).get("ManuallySeparateNPU") == "Ascend910-1", "the rewrite")
    messages = [record.getMessage() for record in caplog.records]
    assert any("'NPU-7' is not a device name like 'Ascend910-0'; ignored" in m for m in messages)
    assert any("names chips this node does not have (Ascend910-9); they are dropped" in m for m in messages)
    assert any("UpgradeFaultReason is not valid JSON" in m for m in messages)
    # A listed chip whose reason is lost stays separated, with Huawei's autofilled reason.
    [reason] = json.loads(data(apiserver)["UpgradeFaultReason"])["Ascend910-1"]
    assert (reason["fault_code"], reason["upgrade_type"]) == ("AutofillFaultCode", "FaultAutofill")


async def test_an_operator_deleting_the_name_releases_the_chip_with_a_node_event(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    inventory, node, _ = separated(short_tmp)
    async with running(posting_events(kube, inventory, node), publisher(kube, inventory, node).run):
        await named(apiserver)
        edit(apiserver, ManuallySeparateNPU="")
        await until(lambda: inventory.chips()[1].healthy, "the chip released and judged healthy")
        await until(lambda: data(apiserver)["UpgradeFaultReason"] == "{}", "its reason gone")
        # The write that drops the reason may come before the one that lists the chip free again.
        await until(
            lambda: device_list(apiserver)["huawei.com/Ascend910"] == "Ascend910-0,Ascend910-1", "free"
        )
        await until(lambda: release_events(apiserver), "the release Event")
    judged = inventory.chips()[1].health.judgement
    assert judged is not None
    assert (judged.level, judged.healthy, judged.manually_separated) == (FaultLevel.NormalNPU, True, False)
    assert data(apiserver)["ManuallySeparateNPU"] == ""
    assert device_list(apiserver)["huawei.com/Ascend910"] == "Ascend910-0,Ascend910-1"
    [event] = release_events(apiserver)
    assert event["type"] == "Normal"
    assert event["involvedObject"]["name"] == NODE
    assert event["message"] == (
        "Ascend910-1 no longer manually separated (removed from ManuallySeparateNPU): "
        "80E18005 at ManuallySeparateNPU by FaultFrequency since 2026-01-01T00:00:00Z"
    )


async def test_other_edits_release_nothing_and_names_added_by_hand_are_dropped(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory, node, _ = separated(short_tmp)
    async with running(publisher(kube, inventory, node).run):
        await named(apiserver)
        # Only the plugin adds names: one added by hand is dropped again at once, the separation stays.
        edit(apiserver, ManuallySeparateNPU="Ascend910-0,Ascend910-1", Description="edited")
        await until(lambda: data(apiserver)["ManuallySeparateNPU"] == "Ascend910-1", "the name dropped")
        # Deleting the whole ConfigMap is no release either: it is written again as it was.
        apiserver.delete("configmaps", NAME, NAMESPACE)
        await until(lambda: data(apiserver).get("ManuallySeparateNPU") == "Ascend910-1", "recreated")
    assert node.policy.manually_separated() == (1,)
    assert not inventory.chips()[1].healthy
    assert not inventory.chips()[0].health.judgement.manually_separated  # type: ignore[union-attr]


async def test_a_release_window_passing_is_a_node_event_too(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    rule = {
        "EventId": ["80E18005"],
        "TimeWindow": 86400,
        "Times": 3,
        "FaultHandling": "ManuallySeparateNPU",
        "ReleaseTimeWindow": 600,
    }
    inventory, node, judged = separated(short_tmp, Node(configured(customization={"FaultFrequency": [rule]})))
    async with running(posting_events(kube, inventory, node), publisher(kube, inventory, node).run):
        await named(apiserver)
        node.clock.advance(601)
        judged.judge()  # the monitor judges again at the policy's wake_at
        await until(lambda: data(apiserver)["ManuallySeparateNPU"] == "", "released")
        await until(lambda: release_events(apiserver), "the release Event")
    [event] = release_events(apiserver)
    assert event["message"].startswith(
        "Ascend910-1 no longer manually separated (clear for its ReleaseTimeWindow): 80E18005"
    )
