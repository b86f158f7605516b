"""Three occurrences of a FaultFrequency code in a day separate the chip for good (Huawei's built-in rule).

Through the health monitor on both fakes, with the monitor's and the fault
policy's clocks moved by the test: ``80E18005`` comes and goes three times, an
hour apart (far outside the flap window: damping plays no part). The third
occurrence escalates the chip to ManuallySeparateNPU; it stays Unhealthy after
the fault clears, an hour and a day later, until an operator releases it
(tests/test_fault_manual_separation.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored

from ascend_plugin.fault_policy.faults import FaultLevel
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

CODE = "80E18005"
HOUR = 3600.0


def _chip(*codes: str) -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "chips": [{"phy_id": 0, "health": 1, "fault_codes": list(codes)}]}
    )


async def _poll_after(watched: Monitored, player: ScenarioPlayer[Any], seconds: float, *codes: str) -> bool:
    watched.clock.advance(seconds)
    player.update(_chip(*codes))
    await watched.monitor.poll_all()
    return watched.device("Ascend910-0").healthy


async def test_the_third_occurrence_in_a_day_separates_the_chip_until_released(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_chip())) as watched:
        await watched.monitor.poll_all()
        for occurrence in range(1, 3):
            assert not await _poll_after(watched, any_fake, HOUR, CODE)
            assert watched.device("Ascend910-0").worst_level is FaultLevel.RestartNPU, occurrence
            assert await _poll_after(
                watched,
                any_fake,
                60,
            ), "cleared: healthy again"
        assert not await _poll_after(watched, any_fake, HOUR, CODE)
        separated = watched.device("Ascend910-0")
        assert separated.worst_level is FaultLevel.ManuallySeparateNPU
        assert separated.judgement is not None
        assert separated.judgement.manually_separated
        assert "80E18005 escalated to ManuallySeparateNPU (FaultFrequency)" in separated.reason
        assert watched.faults.policy.manually_separated() == (0,)

        for later in (60, HOUR, 24 * HOUR):
            assert not await _poll_after(watched, any_fake, later), (
                f"released {later} s after the fault cleared"
            )
        cleared = watched.device("Ascend910-0")
        assert cleared.faults == ()  # no code on the chip: the escalation alone keeps it out
        assert cleared.reason == "80E18005 escalated to ManuallySeparateNPU (FaultFrequency)"
