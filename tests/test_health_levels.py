"""Fault levels decide health: Normal, NotHandle and SubHealth keep a chip; worse levels take it away.

The levels are Huawei's (the built-in faultCode.json), with an operator's file
in the plugin's own format laid over them, judged by the fault policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored

from ascend_plugin.fault_policy.config import base_config
from ascend_plugin.fault_policy.documents import FaultConfigError
from ascend_plugin.fault_policy.faults import FaultLevel
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

# One made-up code per level, declared in an operator's table file.
CUSTOM = {
    "ManuallySeparateNPU": "A0000001",
    "PreSeparateNPU": "A0000002",
    "FreeRestartNPU": "A0000003",
    "RestartBusiness": "A0000004",
    "RestartRequest": "A0000005",
}


def _one_chip(codes: list[str], health: int = 0) -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "310P3", "chips": [{"phy_id": 0, "health": health, "fault_codes": codes}]}
    )


@pytest.mark.parametrize(
    ("codes", "health", "healthy", "worst"),
    [
        ([], 0, True, FaultLevel.NormalNPU),
        (["80E21007"], 1, True, FaultLevel.NotHandleFault),
        (["81A3880C"], 1, True, FaultLevel.SubHealthFault),
        (["81A3880C", "80E21007"], 1, True, FaultLevel.SubHealthFault),
        (["80E01801"], 2, False, FaultLevel.RestartBusiness),
        (["80818C00"], 2, False, FaultLevel.SeparateNPU),
        (["40F84E00"], 2, False, FaultLevel.RestartNPU),
        # PreSeparateNPU on a chip no pod holds: unhealthy (tests/test_health_pre_separate_held.py).
        *[([code], 2, False, FaultLevel[level]) for level, code in CUSTOM.items()],
        # An unknown code a poll found is NotHandleFault, whatever the chip's health value (Huawei's rule).
        (["12345678"], 1, True, FaultLevel.NotHandleFault),
        (["12345678"], 3, True, FaultLevel.NotHandleFault),
        # A SubHealth code next to a RestartBusiness one: the first list in Huawei's order that holds one.
        (["81A3880C", "80E01801"], 2, False, FaultLevel.RestartBusiness),
    ],
)
async def test_level_decides_health(
    any_fake: ScenarioPlayer[Any],
    tmp_path: Path,
    codes: list[str],
    health: int,
    healthy: bool,
    worst: FaultLevel,
) -> None:
    table_file = tmp_path / "levels.json"
    table_file.write_text(json.dumps({level: [code] for level, code in CUSTOM.items()}))
    with monitored(any_fake.open(_one_chip(codes, health)), base=base_config(table_file)) as watched:
        await watched.monitor.poll_all()
        device = watched.device("Ascend310P-0")
        assert device.healthy is healthy, device.reason
        assert device.worst_level is worst


async def test_a_major_alarm_without_a_code_is_unhealthy(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(_one_chip([], health=2))) as watched:
        await watched.monitor.poll_all()
        device = watched.device("Ascend310P-0")
        assert not device.healthy
        assert device.reason == "health value 2 (major alarm) without a fault code"


async def test_a_dropped_card_is_unhealthy_with_the_card_drop_code(any_fake: ScenarioPlayer[Any]) -> None:
    dropped_card = {
        "chip_name": "310P3",
        "chips": [{"phy_id": 0, "errors": {"health": -8012}}, {"phy_id": 1}],
    }
    with monitored(any_fake.open(FakeScenario.model_validate(dropped_card))) as watched:
        await watched.monitor.poll_all()
        dropped, other = watched.device("Ascend310P-0"), watched.device("Ascend310P-1")
        assert not dropped.healthy
        assert dropped.reason == "card dropped off the bus (no health answer)"
        assert dropped.codes == ["40F84E00"]
        assert other.healthy


async def test_an_operators_file_moves_a_code_to_another_level(
    any_fake: ScenarioPlayer[Any], tmp_path: Path
) -> None:
    table_file = tmp_path / "levels.json"
    table_file.write_text(json.dumps({"NotHandleFault": ["80E01801"]}))
    with monitored(any_fake.open(_one_chip(["80E01801"], 1)), base=base_config(table_file)) as watched:
        await watched.monitor.poll_all()
        device = watched.device("Ascend310P-0")
        assert device.healthy, device.reason
        assert device.worst_level is FaultLevel.NotHandleFault


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"Fatal": ["80E01801"]}, "unknown fault level 'Fatal'; allowed: NormalNPU"),
        ({"SeparateNPU": "80E01801"}, "SeparateNPU must be a list of hex codes"),
        ({"SeparateNPU": ["zz"]}, "'zz' is not a hex fault code"),
        (["80E01801"], "expected an object of level -> list of hex codes"),
    ],
)
def test_a_bad_table_file_is_named(tmp_path: Path, content: object, message: str) -> None:
    table_file = tmp_path / "levels.json"
    table_file.write_text(json.dumps(content))
    with pytest.raises(FaultConfigError, match=message):
        base_config(table_file)
