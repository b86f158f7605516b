"""Fault levels decide health: Normal, NotHandle and SubHealth keep a chip; worse levels take it away."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored

from ascend_plugin.faults import FaultLevel, FaultTableError, builtin_table, load_table
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
        (["80E01801"], 2, False, FaultLevel.SeparateNPU),
        (["40F84E00"], 2, False, FaultLevel.RestartNPU),
        *[([code], 2, False, FaultLevel[level]) for level, code in CUSTOM.items()],
        # Unknown codes go by severity; polling has only the chip's health value to go on.
        (["12345678"], 1, True, FaultLevel.NotHandleFault),
        (["12345678"], 3, False, FaultLevel.SeparateNPU),
        # A SubHealth code next to a Separate one: the worst wins.
        (["81A3880C", "80E01801"], 2, False, FaultLevel.SeparateNPU),
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
    with monitored(any_fake.open(_one_chip(codes, health)), table=load_table(table_file)) as watched:
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


def test_operator_table_overrides_the_builtin_level(tmp_path: Path) -> None:
    table_file = tmp_path / "levels.json"
    table_file.write_text(json.dumps({"NotHandleFault": ["80E01801"]}))
    assert builtin_table().level_of(0x80E01801, None) is FaultLevel.SeparateNPU
    assert load_table(table_file).level_of(0x80E01801, None) is FaultLevel.NotHandleFault


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
    with pytest.raises(FaultTableError, match=message):
        load_table(table_file)
