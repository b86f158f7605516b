"""SuperPodID and ServerIndex in the device-info ConfigMap: read once at start on A3, -2 elsewhere.

Discovery asks the family's backend on either fake (``dcmi_get_device_info``
CHIP_INF / SPOD_INFO), the publisher writes what it found to the loopback API
server through the real kubernetes-asyncio client.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import ScenarioPlayer
from kube_harness import running
from node_harness import discovered
from waiting import until

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

NAMESPACE, NAME = "kube-system", "mindx-dl-deviceinfo-npu-node-1"
A3 = {"chip_name": "Ascend910", "npu_name": "9392", "chips": [{"phy_id": 0}, {"phy_id": 1, "card_id": 0}]}
IN_A_POD = {"super_pod_id": 12, "server_id": 5, "scale_type": 2, "chassis_id": 1, "super_pod_type": 3}


async def written_place(apiserver: FakeApiServer, kube: Kube, inventory: Inventory) -> tuple[int, int]:
    publisher = DeviceInfoPublisher(kube, inventory, NAMESPACE, NAME, 300.0)
    async with running(publisher.run):
        await until(lambda: apiserver.get("configmaps", NAME, NAMESPACE) is not None, "the ConfigMap")
    configmap = apiserver.get("configmaps", NAME, NAMESPACE)
    assert configmap is not None
    document = json.loads(configmap["data"]["DeviceInfoCfg"])
    assert list(document) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"]
    return document["SuperPodID"], document["ServerIndex"]


async def test_an_a3_in_a_super_pod_says_where(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls, apiserver: FakeApiServer, kube: Kube
) -> None:
    inventory = await discovered(any_fake, calls, A3 | {"super_pod": IN_A_POD})
    assert await written_place(apiserver, kube, inventory) == (12, 5)


async def test_a_standalone_a3_writes_minus_one(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls, apiserver: FakeApiServer, kube: Kube
) -> None:
    # The driver's 0xffffffff ("in no super pod") is Huawei's -1.
    inventory = await discovered(any_fake, calls, A3)
    assert await written_place(apiserver, kube, inventory) == (-1, -1)


async def test_an_a3_whose_chips_all_fail_the_query_writes_minus_two(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls, apiserver: FakeApiServer, kube: Kube
) -> None:
    failing = {"errors": {"super_pod_info": -8020}}
    scenario = A3 | {"chips": [{"phy_id": 0} | failing, {"phy_id": 1, "card_id": 0} | failing]}
    inventory = await discovered(any_fake, calls, scenario)
    assert inventory.facts.super_pod is None
    assert await written_place(apiserver, kube, inventory) == (-2, -2)


async def test_one_chip_that_answers_is_enough(any_fake: ScenarioPlayer[Any], calls: ChipCalls) -> None:
    chips = [{"phy_id": 0, "errors": {"super_pod_info": -8020}}, {"phy_id": 1, "card_id": 0}]
    inventory = await discovered(any_fake, calls, A3 | {"super_pod": IN_A_POD, "chips": chips})
    assert inventory.facts.super_pod is not None
    assert (inventory.facts.super_pod.super_pod_id, inventory.facts.super_pod.server_id) == (12, 5)


@pytest.mark.parametrize("chip_name", ["910B3", "310P3", "310B1"])
async def test_other_families_are_not_asked_and_write_minus_two(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls, apiserver: FakeApiServer, kube: Kube, chip_name: str
) -> None:
    # A super pod configured in the scenario is never asked for off A3.
    scenario = {"chip_name": chip_name, "super_pod": IN_A_POD, "chips": [{"phy_id": 0}]}
    inventory = await discovered(any_fake, calls, scenario)
    assert await written_place(apiserver, kube, inventory) == (-2, -2)
