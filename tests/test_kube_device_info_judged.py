"""The device-info ConfigMap from the fault policy's judgements: network and recovering keys, fault elements.

The inventory carries the policy's judgements (:class:`kube_harness.Judged`
stands in for the health monitor), on a clock the test moves; the publisher
writes to the loopback API server through the real kubernetes-asyncio client.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fault_policy_harness import LINK_DOWN, START, Node
from kube_harness import NODE, Judged, make_inventory, running, set_faults
from waiting import until

from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

NAMESPACE, NAME = "kube-system", f"mindx-dl-deviceinfo-{NODE}"
HBM = 0x80E01801  # RestartBusiness in Huawei's built-in lists
START_MS = round(START * 1000)


def document(apiserver: FakeApiServer) -> dict[str, Any]:
    configmap = apiserver.get("configmaps", NAME, NAMESPACE)
    parsed: dict[str, Any] = json.loads(configmap["data"]["DeviceInfoCfg"]) if configmap else {}
    return parsed


def device_list(apiserver: FakeApiServer) -> dict[str, str]:
    listed: dict[str, str] = document(apiserver).get("DeviceInfo", {}).get("DeviceList", {})
    return listed


def publisher(kube: Kube, inventory: Inventory, node: Node) -> DeviceInfoPublisher:
    return DeviceInfoPublisher(kube, inventory, NAMESPACE, NAME, 300.0, policy=node.policy)


async def test_a_link_down_past_its_duration_lists_the_chip_as_network_unhealthy(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1))
    node = Node()
    judged = Judged(inventory, node.policy)
    node.raised(0, LINK_DOWN)
    node.clock.advance(21)  # FaultDuration: 20 s down -> PreSeparateNPU for the network
    judged.judge()
    inventory.set_resetting([1], True)
    async with running(publisher(kube, inventory, node).run):
        await until(lambda: device_list(apiserver).get("huawei.com/Ascend910-NetworkUnhealthy"), "written")
    listed = device_list(apiserver)
    assert listed["huawei.com/Ascend910-NetworkUnhealthy"] == "Ascend910-0"
    assert listed["huawei.com/Ascend910-Recovering"] == "Ascend910-1"
    # The chip itself is fine: healthy for the kubelet, so free; the one being reset is not.
    assert (listed["huawei.com/Ascend910"], listed["huawei.com/Ascend910-Unhealthy"]) == (
        "Ascend910-0",
        "Ascend910-1",
    )
    network, resetting = json.loads(listed["huawei.com/Ascend910-Fault"])
    assert network == {
        "fault_type": "CardNetworkUnhealthy",
        "npu_name": "Ascend910-0",
        "large_model_fault_level": "PreSeparateNPU",
        "fault_level": "PreSeparateNPU",
        "fault_handling": "PreSeparateNPU",
        "fault_code": "81078603",
        # Under FaultDuration the fault counts as occurred once its FaultTimeout passed.
        "fault_time_and_level_map": {
            "81078603": {"fault_time": START_MS + 20_000, "fault_level": "PreSeparateNPU"}
        },
    }
    assert (resetting["npu_name"], resetting["fault_type"], resetting["fault_code"]) == (
        "Ascend910-1",
        "CardUnhealthy",
        "",
    )
    # Huawei's UpgradeFaultReason records the FaultDuration escalation, in milliseconds.
    reasons = json.loads(apiserver.get("configmaps", NAME, NAMESPACE)["data"]["UpgradeFaultReason"])  # type: ignore[index]
    assert reasons == {
        "Ascend910-0": [
            {
                "upgrade_time": START_MS + 20_000,
                "fault_code": "81078603",
                "fault_level": "PreSeparateNPU",
                "upgrade_type": "FaultDuration",
            }
        ]
    }


async def test_a_310p_node_has_no_network_or_recovering_keys(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp, family="310P", chip_name="310P3", phy_ids=(0,))
    node = Node()
    node.raised(0, HBM)
    Judged(inventory, node.policy).judge()
    inventory.set_resetting([0], True)
    async with running(publisher(kube, inventory, node).run):
        await until(lambda: device_list(apiserver), "written")
    listed = device_list(apiserver)
    assert set(listed) == {
        "huawei.com/Ascend310P",
        "huawei.com/Ascend310P-Unhealthy",
        "huawei.com/Ascend310P-Fault",
    }
    [element] = json.loads(listed["huawei.com/Ascend310P-Fault"])
    assert (element["fault_code"], element["fault_level"]) == ("80E01801", "RestartBusiness")


async def test_judged_and_unjudged_chips_side_by_side_and_the_check_code(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1))
    node = Node()
    node.raised(0, HBM)
    Judged(inventory, node.policy).judge()
    # Chip 1's verdict came without a judgement (a hung call, say): it is reported from the verdict.
    set_faults(inventory, "Ascend910-1", (0x80CB8009, FaultLevel.SeparateNPU))
    async with running(publisher(kube, inventory, node).run):
        await until(lambda: device_list(apiserver), "written")
    written = document(apiserver)
    judged, unjudged = json.loads(written["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"])
    assert (judged["npu_name"], judged["fault_code"], judged["fault_handling"]) == (
        "Ascend910-0",
        "80E01801",
        "RestartBusiness",
    )
    assert judged["fault_time_and_level_map"]["80E01801"]["fault_time"] == START_MS  # the policy's clock
    assert (unjudged["npu_name"], unjudged["fault_code"], unjudged["fault_handling"]) == (
        "Ascend910-1",
        "80CB8009",
        "SeparateNPU",
    )
    # CheckCode: sha256 of DeviceInfo's Go JSON; plain ASCII needs no Go-specific escapes here.
    text = json.dumps(written["DeviceInfo"], separators=(",", ":"), sort_keys=True)
    assert text.isascii()
    assert written["CheckCode"] == hashlib.sha256(text.encode()).hexdigest()
