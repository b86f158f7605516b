"""The monitor looks again when the fault policy's next deadline passes, not only at its next poll.

Polls are an hour apart here, on a 310P chip (no fault events, no RoCE link to
read: nothing else wakes the monitor). A FaultDuration rule (from Huawei's ConfigMap)
escalates ``80E21007`` once it has been present longer than 1 s: the policy's
deadline, on its own clock (moved by the test), brings the chip's next look
forward, and the escalation reaches the verdict without waiting for the poll.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored, watching
from waiting import until

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.monitor import HealthPolicy
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RULE = {"EventId": ["80E21007"], "FaultTimeout": 1, "RecoverTimeout": 0, "FaultHandling": "SeparateNPU"}


def _chip() -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "310P3", "chips": [{"phy_id": 0, "health": 1, "fault_codes": ["80E21007"]}]}
    )


async def test_a_fault_duration_timeout_is_judged_when_it_passes(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(_chip()), policy=HealthPolicy(interval=3600.0)) as watched:
        watched.faults.set_configmap({"faultCustomization.json": json.dumps({"FaultDuration": [RULE]})})
        await watched.monitor.poll_all()
        assert watched.device("Ascend310P-0").healthy  # NotHandleFault, present for no time yet
        reads: list[str] = []
        watched.calls.on_call_done(lambda name, _seconds, _outcome: reads.append(name))
        async with watching(watched):
            await until(lambda: "read_health" in reads, "the monitor's first look")  # it then waits
            watched.clock.advance(2.0)  # the deadline (1 s on) is past when the monitor wakes for it
            await until(lambda: not watched.device("Ascend310P-0").healthy, "the timeout judged")
        device = watched.device("Ascend310P-0")
        assert device.worst_level is FaultLevel.SeparateNPU
        assert device.reason.endswith("80E21007 escalated to SeparateNPU (FaultDuration)")
