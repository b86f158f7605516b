"""doctor, the chips: dcmi_init, enumeration, family and AI-core figures, on both fakes."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Guide, Status
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio


def _scenario(**values: Any) -> FakeScenario:
    return FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]} | values)


async def test_a_healthy_310b1_passes_every_chip_check(doctor_root: DoctorRoot) -> None:
    found = await doctor_root.run()
    assert [found[name].status for name in ("dcmi-init", "chips", "chip-family", "ai-cores")] == [
        Status.OK
    ] * 4
    assert found["dcmi-init"].detail.endswith("driver 24.1.rc1")
    assert found["chips"].detail == "1 chip(s): chip 0 (card 0, device 0, 310B1)"
    assert found["chip-family"].detail == "chip name 310B1 -> family 310B, resource huawei.com/Ascend310"
    assert found["ai-cores"].detail == (
        "AI cores per chip: 1 (from vdev_total_resource), within the 310B family's bounds [1, 1]"
    )


async def test_huaweis_global_bounds_name_the_setting_to_change(doctor_root: DoctorRoot) -> None:
    ai_cores = (await doctor_root.run(ai_core_min=8, ai_core_max=36))["ai-cores"]
    assert ai_cores.status is Status.PROBLEM
    assert ai_cores.see is Guide.AI_CORES
    assert "chip 0 (card 0, device 0, 310B1) report(s) 1 AI cores" in ai_cores.detail
    assert "outside the 310B family's bounds [8, 36]" in ai_cores.detail
    assert ai_cores.fix is not None
    assert ai_cores.fix.startswith(
        "if 1 is right for this hardware, set ai_core_min=1 (--ai-core-min 1, ASCEND_DP_AI_CORE_MIN=1, "
        "Helm settings.aiCoreMin: 1)"
    )
    assert "ai_core_min is overridden to 8 here, but the 310B family's own value is 1" in ai_cores.fix


async def test_a_figure_above_the_bounds_names_ai_core_max(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(_scenario(aicore=2.0))
    ai_cores = (await doctor_root.run())["ai-cores"]
    assert (ai_cores.status, ai_cores.see) == (Status.PROBLEM, Guide.AI_CORES)
    assert ai_cores.fix is not None
    assert "set ai_core_max=2 (--ai-core-max 2" in ai_cores.fix
    assert "overridden" not in ai_cores.fix  # the family's own bound, nothing of the operator's


async def test_a_failing_dcmi_init_is_named_and_stops_the_chip_checks(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(_scenario(errors={"init": -8005}))
    found = await doctor_root.run()
    assert found["dcmi-init"].status is Status.PROBLEM
    assert "-8005" in found["dcmi-init"].detail
    assert found["dcmi-init"].fix is not None
    assert "npu-smi info" in found["dcmi-init"].fix
    assert found["chips"].detail == "not checked: dcmi-init did not pass"
    assert found["device-nodes"].status is Status.SKIPPED


async def test_no_chips_is_a_problem(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(_scenario(chips=[]))
    chips = (await doctor_root.run())["chips"]
    assert chips.status is Status.PROBLEM
    assert chips.detail.endswith("reports no NPU chips")


async def test_an_unknown_chip_name_names_the_chip_family_setting(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(_scenario(chip_name="Z42"))
    found = await doctor_root.run()
    family = found["chip-family"]
    assert family.status is Status.PROBLEM
    assert "'Z42' matches no supported family" in family.detail
    assert family.fix is not None
    assert "chip_family=<family> (--chip-family <family>" in family.fix
    assert found["ai-cores"].detail == "not checked: chip-family did not pass"


async def test_a_forced_family_is_used_and_said(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(_scenario(chip_name="Z42"))
    found = await doctor_root.run(chip_family="310B")
    assert found["chip-family"].detail == "310B, forced by the chip_family setting"
    assert found["ai-cores"].status is Status.OK
    assert found["host-file:/var/slogd"].status is Status.OK


async def test_a_large_node_is_summarised(doctor_py_root: DoctorRoot) -> None:
    chips = [{"phy_id": phy, "card_id": phy // 4, "device_id": phy % 4} for phy in range(12)]
    doctor_py_root.write_scenario(_scenario(chip_name="910B3", chips=chips))
    found = await doctor_py_root.run()
    assert found["chips"].detail.startswith("12 chip(s): chip 0 (card 0, device 0, 910B3), ")
    assert found["chips"].detail.endswith(" and 4 more")
    assert found["ai-cores"].detail == (
        "AI cores per chip: 20 (from vdev_total_resource), within the 910 family's bounds [20, 32]"
    )
