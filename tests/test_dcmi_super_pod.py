"""SuperPodID and ServerIndex: ``dcmi_get_device_info(CHIP_INF, SPOD_INFO)`` on A3, -8255 elsewhere.

The driver's 0xffffffff ("no super pod") arrives as -1, as Huawei writes it in
the device-info ConfigMap; a query that fails is the caller's -2 to make.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer
from fake_dcmi.scenario_file import render

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import SuperPodInfo

A3 = {"chip_name": "Ascend910", "npu_name": "9392", "chips": [{"phy_id": 0}, {"phy_id": 1, "card_id": 0}]}


def test_a_standalone_a3_is_in_no_super_pod(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate(A3))
    assert library.super_pod_info(0, 1) == SuperPodInfo(
        sdid=1, scale_type=0, super_pod_id=-1, server_id=-1, chassis_id=0, super_pod_type=0
    )


def test_an_a3_in_a_super_pod_says_where(any_fake: ScenarioPlayer[Any]) -> None:
    pod = {"super_pod_id": 12, "server_id": 5, "scale_type": 2, "chassis_id": 1, "super_pod_type": 3}
    library = any_fake.open(FakeScenario.model_validate(A3 | {"super_pod": pod}))
    info = library.super_pod_info(0, 0)
    assert (info.super_pod_id, info.server_id, info.scale_type, info.chassis_id, info.super_pod_type) == (
        12,
        5,
        2,
        1,
        3,
    )


def test_other_chips_do_not_support_the_query(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]}))
    with pytest.raises(DcmiError) as raised:
        library.super_pod_info(0, 0)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_info", -8255)


def test_the_binding_turns_the_driver_s_all_ones_into_minus_one(c_fake: CFakePlayer) -> None:
    scenario = FakeScenario.model_validate(A3)
    assert "spod=0:0:4294967295:4294967295:0:0" in render(scenario)  # what the C fake hands over
    assert c_fake.open(scenario).super_pod_info(0, 0).super_pod_id == -1
