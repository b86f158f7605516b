"""Codes no list holds: NotHandleFault when a poll found them, SeparateNPU from an event of severity >= 2.

Huawei's rule, through the health monitor on both fakes: a poll knows nothing
of a code's severity (Huawei's plugin gives polled codes severity 0), so an
unknown polled code changes nothing, whatever the chip's health value; a fault
event says how severe it is, and a major or critical one separates the chip.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored
from waiting import until

from ascend_plugin.fault_policy.faults import Fault, FaultLevel
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

UNKNOWN = 0x12345678


def _chip(**chip: object) -> FakeScenario:
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0, **chip}]})


async def test_an_unknown_polled_code_is_not_handled(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(_chip(health=3, fault_codes=[f"{UNKNOWN:08X}"]))) as watched:
        await watched.monitor.poll_all()
        device = watched.device("Ascend910-0")
        assert device.healthy, device.reason
        assert device.faults == (Fault(UNKNOWN, FaultLevel.NotHandleFault),)


@pytest.mark.parametrize(
    ("severity", "level"),
    [
        (0, FaultLevel.NotHandleFault),
        (1, FaultLevel.NotHandleFault),
        (2, FaultLevel.SeparateNPU),
        (3, FaultLevel.SeparateNPU),
    ],
)
async def test_an_unknown_event_code_goes_by_its_severity(
    any_fake: ScenarioPlayer[Any], severity: int, level: FaultLevel
) -> None:
    with monitored(any_fake.open(_chip())) as watched:
        await watched.monitor.poll_all()
        await watched.monitor.subscribe()
        assert watched.monitor.subscribed
        raised = {"serial": 1, "code": f"{UNKNOWN:08X}", "severity": severity, "assertion": 1}
        any_fake.update(_chip(events=[raised]))
        await until(lambda: watched.device("Ascend910-0").faults, "the event applied")
        device = watched.device("Ascend910-0")
        assert device.faults == (Fault(UNKNOWN, level),)
        assert device.healthy is level.healthy
        if not level.healthy:
            assert device.reason == "fault 12345678:SeparateNPU (event)"
