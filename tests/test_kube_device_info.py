"""The device-info ConfigMap: Huawei's exact format and CheckCode, following health, coalesced, refreshed."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, make_inventory, running, set_faults
from waiting import WAIT, until

from ascend_plugin.faces.kube.device_info import MIN_WRITE_INTERVAL, DeviceInfoPublisher
from ascend_plugin.faces.kube.huawei_format import (
    FaultClock,
    build_device_info,
    check_code,
    chip_report,
    chip_views,
    go_json,
)
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

NAMESPACE = "kube-system"
NAME = f"mindx-dl-deviceinfo-{NODE}"
SEPARATE = 0x80E01801

# A DeviceInfoCfg value as Huawei's plugin wrote it on an Atlas A3 node, with the
# CheckCode it computed, from Huawei's MindCluster documentation (the section
# on the Ascend Device Plugin's fault information). Reproducing it byte for byte
# and its CheckCode is the proof that our serialisation is Go's.
HUAWEI_SAMPLE = (
    '{"DeviceInfo":{"DeviceList":{"huawei.com/Ascend910":"Ascend910-0,Ascend910-1,Ascend910-2,Ascend910-3,'
    'Ascend910-5,Ascend910-6,Ascend910-7","huawei.com/Ascend910-Fault":"[{\\"fault_type\\":\\"CardNetworkUnhealthy'
    '\\",\\"npu_name\\":\\"Ascend910-0\\",\\"large_model_fault_level\\":\\"PreSeparateNPU\\",\\"fault_level\\":'
    '\\"PreSeparateNPU\\",\\"fault_handling\\":\\"PreSeparateNPU\\",\\"fault_code\\":\\"81078603\\",\\"fault_time'
    '_and_level_map\\":{\\"81078603\\":{\\"fault_time\\":1744168468259,\\"fault_level\\":\\"PreSeparateNPU\\"}}},'
    '{\\"fault_type\\":\\"CardUnhealthy\\",\\"npu_name\\":\\"Ascend910-4\\",\\"large_model_fault_level\\":\\"'
    'SeparateNPU\\",\\"fault_level\\":\\"SeparateNPU\\",\\"fault_handling\\":\\"SeparateNPU\\",\\"fault_code\\":'
    '\\"A8028801,A4028801,80E18402,80E18401\\",\\"fault_time_and_level_map\\":{\\"80E18401\\":{\\"fault_time\\":'
    '1744167455784,\\"fault_level\\":\\"NotHandleFault\\"},\\"80E18402\\":{\\"fault_time\\":1744167455784,\\"'
    'fault_level\\":\\"SeparateNPU\\"},\\"A4028801\\":{\\"fault_time\\":1744167455784,\\"fault_level\\":\\"'
    'NotHandleFault\\"},\\"A8028801\\":{\\"fault_time\\":1744167455784,\\"fault_level\\":\\"SeparateNPU\\"}}}]",'
    '"huawei.com/Ascend910-NetworkUnhealthy":"Ascend910-0","huawei.com/Ascend910-Recovering":"",'
    '"huawei.com/Ascend910-Unhealthy":"Ascend910-4"},"UpdateTime":1744182144},"SuperPodID":-2,"ServerIndex":-2,'
    '"CheckCode":"a550811fdfafb5717555526816af2ca4ac6c3e102f5907574048578e0c8fcc73"}'
)


def independent_check_code(device_info: dict[str, Any]) -> str:
    """CheckCode computed here without the plugin's code: plain ASCII content needs no Go-specific escapes."""
    text = json.dumps(device_info, separators=(",", ":"), sort_keys=True)
    assert text.isascii()
    return hashlib.sha256(text.encode()).hexdigest()


def stored(apiserver: FakeApiServer) -> dict[str, Any] | None:
    return apiserver.get("configmaps", NAME, NAMESPACE)


def device_info_cfg(apiserver: FakeApiServer) -> dict[str, Any]:
    configmap = stored(apiserver)
    assert configmap is not None
    parsed: dict[str, Any] = json.loads(configmap["data"]["DeviceInfoCfg"])
    return parsed


def device_list(apiserver: FakeApiServer) -> dict[str, str]:
    if stored(apiserver) is None:
        return {}
    listed: dict[str, str] = device_info_cfg(apiserver)["DeviceInfo"]["DeviceList"]
    return listed


def writes(apiserver: FakeApiServer) -> list[Any]:
    """Successful writes of the ConfigMap (create or update)."""
    return [
        r
        for r in apiserver.requests
        if r.resource == "configmaps" and r.verb in ("create", "update") and r.status in (200, 201)
    ]


def publisher(kube: Kube, inventory: Inventory, refresh: float = 300.0) -> DeviceInfoPublisher:
    return DeviceInfoPublisher(kube, inventory, NAMESPACE, NAME, refresh)


def test_our_go_json_reproduces_huawei_output_and_check_code() -> None:
    document = json.loads(HUAWEI_SAMPLE)
    assert go_json(document) == HUAWEI_SAMPLE
    assert check_code(document["DeviceInfo"]) == document["CheckCode"]
    fault_list = document["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Fault"]
    assert go_json(json.loads(fault_list)) == fault_list


def test_go_json_escapes_like_go() -> None:
    assert go_json({"a": "<b> & \u2028 ü"}) == '{"a":"\\u003cb\\u003e \\u0026 \\u2028 ü"}'


async def test_created_in_huawei_format_with_a_valid_check_code(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    before = int(time.time())
    async with running(publisher(kube, inventory).run):
        await until(lambda: stored(apiserver) is not None, "the ConfigMap")
    after = int(time.time())

    configmap = stored(apiserver)
    assert configmap is not None
    assert configmap["metadata"]["labels"] == {"mx-consumer-cim": "true"}
    assert set(configmap["data"]) == {
        "DeviceInfoCfg",
        "ManuallySeparateNPU",
        "UpgradeFaultReason",
        "Description",
    }
    assert configmap["data"]["ManuallySeparateNPU"] == ""
    assert configmap["data"]["UpgradeFaultReason"] == "{}"
    text = configmap["data"]["DeviceInfoCfg"]
    document = json.loads(text)
    assert list(document) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"]
    assert list(document["DeviceInfo"]) == ["DeviceList", "UpdateTime"]
    assert document["SuperPodID"] == -2
    assert document["ServerIndex"] == -2
    assert before <= document["DeviceInfo"]["UpdateTime"] <= after
    # 310B reports as 310, and Huawei files 310 faults under the 310P key.
    assert document["DeviceInfo"]["DeviceList"] == {
        "huawei.com/Ascend310": "Ascend310-0",
        "huawei.com/Ascend310-Unhealthy": "",
        "huawei.com/Ascend310P-Fault": "[]",
    }
    assert document["CheckCode"] == independent_check_code(document["DeviceInfo"])
    assert " " not in text
    assert apiserver.requests_of("create", "configmaps", 201)


async def test_follows_a_fault_and_its_recovery(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp, phy_ids=(0, 1))
    async with running(publisher(kube, inventory).run):
        await until(
            lambda: device_list(apiserver).get("huawei.com/Ascend310") == "Ascend310-0,Ascend310-1", "first"
        )
        set_faults(
            inventory,
            "Ascend310-1",
            (SEPARATE, FaultLevel.SeparateNPU),
            (0x80CB8009, FaultLevel.NotHandleFault),
        )
        await until(lambda: device_list(apiserver).get("huawei.com/Ascend310") == "Ascend310-0", "the fault")

        listed = device_list(apiserver)
        assert listed["huawei.com/Ascend310-Unhealthy"] == "Ascend310-1"
        faults = json.loads(listed["huawei.com/Ascend310P-Fault"])
        assert len(faults) == 1
        fault = faults[0]
        assert list(fault) == [
            "fault_type",
            "npu_name",
            "large_model_fault_level",
            "fault_level",
            "fault_handling",
            "fault_code",
            "fault_time_and_level_map",
        ]
        assert fault["fault_type"] == "CardUnhealthy"
        assert fault["npu_name"] == "Ascend310-1"
        assert (
            fault["fault_level"]
            == fault["large_model_fault_level"]
            == fault["fault_handling"]
            == "SeparateNPU"
        )
        assert fault["fault_code"] == "80E01801,80CB8009"  # most severe first
        times = fault["fault_time_and_level_map"]
        assert list(times) == ["80CB8009", "80E01801"]  # a Go map: sorted keys
        assert times["80E01801"]["fault_level"] == "SeparateNPU"
        assert times["80CB8009"]["fault_level"] == "NotHandleFault"
        assert abs(times["80E01801"]["fault_time"] / 1000 - time.time()) < 600  # milliseconds, not seconds
        document = device_info_cfg(apiserver)
        assert document["CheckCode"] == independent_check_code(document["DeviceInfo"])

        set_faults(inventory, "Ascend310-1")
        await until(lambda: device_list(apiserver).get("huawei.com/Ascend310P-Fault") == "[]", "the recovery")
        assert device_list(apiserver)["huawei.com/Ascend310"] == "Ascend310-0,Ascend310-1"
        assert device_list(apiserver)["huawei.com/Ascend310-Unhealthy"] == ""


async def test_a_910_node_has_the_network_and_recovering_keys(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1, 2))
    set_faults(inventory, "Ascend910-2", (0x80E18402, FaultLevel.SeparateNPU))
    async with running(publisher(kube, inventory).run):
        await until(lambda: stored(apiserver) is not None, "the ConfigMap")
    configmap = stored(apiserver)
    assert configmap is not None
    assert configmap["data"]["ManuallySeparateNPU"] == ""  # only a fault policy separates manually
    listed = device_list(apiserver)
    assert set(listed) == {
        "huawei.com/Ascend910",
        "huawei.com/Ascend910-Unhealthy",
        "huawei.com/Ascend910-NetworkUnhealthy",
        "huawei.com/Ascend910-Recovering",
        "huawei.com/Ascend910-Fault",
    }
    assert listed["huawei.com/Ascend910-Unhealthy"] == "Ascend910-2"


def test_fault_keys_per_family(short_tmp: Path) -> None:
    def keys(family: str, chip_name: str) -> set[str]:
        inventory = make_inventory(short_tmp, family=family, chip_name=chip_name)
        reports = [chip_report(device, {}) for device in chip_views(inventory)]
        return set(build_device_info(reports, inventory.table).device_list)

    assert "huawei.com/Ascend310P-Fault" in keys("310", "310")
    assert "huawei.com/Ascend310P-Fault" in keys("310P", "310P3")
    assert "huawei.com/Ascend910-Fault" in keys("910", "910B3")


def test_a_fault_keeps_its_first_seen_time_until_it_clears(short_tmp: Path) -> None:
    now = [1000.0]
    clock = FaultClock(lambda: now[0])
    inventory = make_inventory(short_tmp)
    set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
    assert clock.observe(chip_views(inventory)) == {("Ascend310-0", SEPARATE): 1_000_000}
    now[0] = 2000.0
    assert clock.observe(chip_views(inventory)) == {("Ascend310-0", SEPARATE): 1_000_000}
    set_faults(inventory, "Ascend310-0")
    assert clock.observe(chip_views(inventory)) == {}
    set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
    assert clock.observe(chip_views(inventory)) == {("Ascend310-0", SEPARATE): 2_000_000}


async def test_bursts_of_changes_are_coalesced_at_most_one_write_a_second(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    async with running(publisher(kube, inventory).run):
        await until(lambda: len(writes(apiserver)) == 1, "the first write")
        changes = 0
        with anyio.fail_after(WAIT):  # the writes two seconds apart, or a failure instead of a hang
            while writes(apiserver)[-1].at - writes(apiserver)[0].at < 2 * MIN_WRITE_INTERVAL:
                set_faults(
                    inventory, "Ascend310-0", *([] if changes % 2 else [(SEPARATE, FaultLevel.SeparateNPU)])
                )
                changes += 1
                await anyio.sleep(0.02)
        # The last state (odd number of toggles: faulty) is what ends up written.
        final_unhealthy = "Ascend310-0" if changes % 2 else ""
        await until(
            lambda: device_list(apiserver)["huawei.com/Ascend310-Unhealthy"] == final_unhealthy,
            "the final state",
        )
    times = [write.at for write in writes(apiserver)]
    assert len(times) < changes
    assert all(later - earlier >= MIN_WRITE_INTERVAL for earlier, later in itertools.pairwise(times))


async def test_an_unchanged_configmap_is_rewritten_every_refresh(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    async with running(publisher(kube, inventory, refresh=1.0).run):
        await until(lambda: len(writes(apiserver)) >= 3, "two refreshes")
    stamps = [
        json.loads(write.body["data"]["DeviceInfoCfg"])["DeviceInfo"]["UpdateTime"]
        for write in writes(apiserver)
    ]
    assert stamps == sorted(stamps)
    assert stamps[0] < stamps[-1]
    lists = {
        json.dumps(json.loads(write.body["data"]["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"])
        for write in writes(apiserver)
    }
    assert len(lists) == 1


async def test_a_write_by_someone_else_is_built_on_not_overwritten(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    async with running(publisher(kube, inventory).run):
        await until(lambda: stored(apiserver) is not None, "the ConfigMap")
        # Someone else writes it: the plugin follows the ConfigMap, and the next write builds on theirs.
        other = stored(apiserver)
        assert other is not None
        other["metadata"]["annotations"] = {"owner": "ops"}
        other["metadata"]["labels"]["team"] = "vision"
        apiserver.put("configmaps", other)

        set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
        await until(
            lambda: device_list(apiserver).get("huawei.com/Ascend310-Unhealthy") == "Ascend310-0", "update"
        )
    configmap = stored(apiserver)
    assert configmap is not None
    assert configmap["metadata"]["annotations"] == {"owner": "ops"}
    assert configmap["metadata"]["labels"] == {"mx-consumer-cim": "true", "team": "vision"}


async def test_recreated_after_someone_deletes_it(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    inventory = make_inventory(short_tmp)
    async with running(publisher(kube, inventory).run):
        await until(lambda: stored(apiserver) is not None, "the ConfigMap")
        apiserver.delete("configmaps", NAME, NAMESPACE)
        set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
        await until(
            lambda: device_list(apiserver).get("huawei.com/Ascend310-Unhealthy") == "Ascend310-0", "recreated"
        )
    assert len(apiserver.requests_of("create", "configmaps", 201)) == 2
