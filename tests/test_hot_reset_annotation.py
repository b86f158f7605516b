"""The node's ResetInfo annotation: the chips that wait for an operator's reset, in Huawei's format.

A separated chip, a reset the driver refuses and a reset whose chip does not
boot in time each name the chip in ``ManualResetDevs``, with a Warning Event
for a failed reset; such a chip is not reset again, and it leaves the
annotation once it is healthy again. A chip the annotation names when the
plugin starts, and that is still unhealthy, is not reset either. While a reset
runs, the device-info ConfigMap lists its group under ``-Recovering``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESTART_NPU, SEPARATE_NPU, RigParts, node_scenario, polled_on, reset_rig
from log_records import fields, records
from volcano_harness import NODE
from waiting import until

from ascend_plugin.faces.kube.reset_info import decode_reset_info, encode_reset_info
from ascend_plugin.hot_reset.manual import Listed, ManualReset
from ascend_plugin.hot_reset.sequence import BOOT_TIMEOUT
from ascend_plugin.hot_reset.stats import Result
from backends.chips import Chip
from backends.library import ChipInfo

pytestmark = pytest.mark.anyio

EMPTY = '{"ThirdPartyResetDevs":[],"ManualResetDevs":[]}'


def reset_info(apiserver: FakeApiServer) -> str | None:
    node = apiserver.get("nodes", NODE)
    assert node is not None
    annotations: dict[str, str] = node["metadata"].get("annotations") or {}
    return annotations.get("ResetInfo")


def manual_devices(apiserver: FakeApiServer) -> list[dict[str, int]] | None:
    text = reset_info(apiserver)
    return None if text is None else list(json.loads(text)["ManualResetDevs"])


def entry(phy: int) -> dict[str, int]:
    return {"CardId": phy, "DeviceId": 0, "AssociatedCardId": -1, "PhyID": phy, "LogicID": phy}


def test_the_annotation_is_huawei_s_format() -> None:
    chip = Chip(card_id=5, device_id=1, logic_id=9, phy_id=3, info=ChipInfo("Ascend", "Ascend910", "V1", 24))
    text = encode_reset_info([ManualReset(chip, 1, "its hot reset failed: ...", Listed.FAILED)])
    assert text == (
        '{"ThirdPartyResetDevs":[],"ManualResetDevs":'
        '[{"CardId":5,"DeviceId":1,"AssociatedCardId":1,"PhyID":3,"LogicID":9}]}'
    )
    assert encode_reset_info([]) == EMPTY
    # Huawei's own writes, its third-party list included, read back; what is not a device is named.
    named, problems = decode_reset_info(
        '{"ThirdPartyResetDevs":[{"PhyID":4}],"ManualResetDevs":[{"PhyID":3},{"CardId":1}],"X":null}'
    )
    assert named == [4, 3]
    assert problems == ['ResetInfo.ManualResetDevs: {"CardId": 1} has no PhyID; skipped']
    assert decode_reset_info("{not json")[0] == []
    assert decode_reset_info('{"ThirdPartyResetDevs":null,"ManualResetDevs":null}') == ([], [])


async def test_a_separated_chip_is_named_until_it_is_healthy_again(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    apiserver = reset_parts.apiserver
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        assert reset_info(apiserver) is None  # nothing to say, nothing written
        rig.write(node_scenario({2: SEPARATE_NPU}))
        await until(lambda: manual_devices(apiserver) == [entry(2)], "chip 2 in ManualResetDevs")
        rig.write(node_scenario())
        await until(lambda: reset_info(apiserver) == EMPTY, "chip 2 off the annotation")
        assert rig.resets() == {}


async def test_a_reset_the_driver_refuses_is_told_named_and_not_tried_again(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver = reset_parts.apiserver
    refusing = node_scenario({0: RESTART_NPU}, chip={0: {"errors": {"reset": -8015}}})
    async with reset_rig(any_fake, reset_parts, node_scenario(), node_events=True) as rig:
        rig.write(refusing)
        await until(lambda: manual_devices(apiserver) == [entry(0)], "chip 0 in ManualResetDevs")
        await until(lambda: len(rig.events()) == 2, "the start and failure Events")
        (start, start_type, started), (failed, failed_type, message) = rig.events()
        assert (start, start_type, failed, failed_type) == (
            "HotResetStart",
            "Warning",
            "HotResetFailed",
            "Warning",
        )
        assert started.startswith("hot reset of Ascend910-0 started, with its reset group Ascend910-0, ")
        assert "dcmi_set_device_reset returned -8015 (reset failed)" in message
        assert rig.manager.stats.results == {Result.FAILED: 1}
        (failure,) = records(caplog, "ascend_plugin.hot_reset.sequence", level=logging.ERROR)
        assert fields(failure, "device", "result") == {"device": "Ascend910-0", "result": "failed"}
        await polled_on(rig)
        assert rig.app.metrics.calls.latency["hot_reset"].calls == 1
        await rig.healthy(1, 2, 3)
        assert rig.health(0) == "Unhealthy"

        rig.write(node_scenario())
        await until(lambda: reset_info(apiserver) == EMPTY, "chip 0 off the annotation")


async def test_a_chip_that_does_not_boot_in_time_is_named_and_its_group_was_recovering(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    apiserver = reset_parts.apiserver
    slow = node_scenario({1: RESTART_NPU}, reset_seconds=3600)
    async with reset_rig(python_fake, reset_parts, node_scenario(), device_info_configmap=True) as rig:
        rig.write(slow)
        await until(lambda: rig.reset_count(1) == 1, "the reset of chip 1")
        await until(lambda: recovering(apiserver) == "Ascend910-0,Ascend910-1,Ascend910-2,Ascend910-3", "")
        rig.advance(BOOT_TIMEOUT)
        await until(lambda: manual_devices(apiserver) == [entry(1)], "chip 1 in ManualResetDevs")
        assert rig.manager.stats.results == {Result.TIMEOUT: 1}
        listed = rig.manager.manual.get(1)
        assert listed is not None
        assert listed.why == "its hot reset failed: not back within 180 s: Ascend910-1 boot status 0"
        # The chips that booted are back; the one that did not stays out until it finishes booting.
        await until(lambda: recovering(apiserver) == "Ascend910-1", "only chip 1 still recovering")
        await rig.healthy(0, 2, 3)
        assert rig.health(1) == "Unhealthy"
        rig.write(node_scenario())  # its boot finishes, and the scenario has no fault for it any more
        await until(lambda: recovering(apiserver) == "", "nothing recovering any more")
        await rig.healthy(0, 1, 2, 3)
        await until(lambda: manual_devices(apiserver) == [], "chip 1 off ManualResetDevs once healthy")


async def test_a_chip_named_when_the_plugin_starts_is_not_reset_again(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    apiserver = reset_parts.apiserver
    from volcano_harness import add_node_object

    add_node_object(apiserver)
    node = apiserver.get("nodes", NODE)
    assert node is not None
    node["metadata"]["annotations"] = {"ResetInfo": json.dumps({"ManualResetDevs": [entry(0), entry(3)]})}
    apiserver.put("nodes", node)
    async with reset_rig(python_fake, reset_parts, node_scenario({0: RESTART_NPU})) as rig:
        await until(lambda: manual_devices(apiserver) == [entry(0)], "chip 3, healthy, dropped")
        listed = rig.manager.manual.get(0)
        assert listed is not None
        assert listed.listed is Listed.RESTORED
        await polled_on(rig)
        assert rig.resets() == {}


def recovering(apiserver: FakeApiServer) -> str | None:
    configmap = apiserver.get("configmaps", f"mindx-dl-deviceinfo-{NODE}", "kube-system")
    if configmap is None:
        return None
    document = json.loads(configmap["data"]["DeviceInfoCfg"])
    value: str = document["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910-Recovering"]
    return value
