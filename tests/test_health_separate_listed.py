"""A code Huawei's configuration lists as SeparateNPU makes the chip Unhealthy, whatever the plugin thought.

Through the health monitor on both fakes: ``80E21007`` is NotHandleFault in
Huawei's shipped ``faultCode.json``, so a chip listing it is Healthy; once the
ConfigMap ``mindx-dl-fault-config`` lists it in ``SeparateNPUCodes``, the next
verdict is Unhealthy at SeparateNPU, and the chip's faults carry that level.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored

from ascend_plugin.fault_policy.faults import Fault, FaultLevel
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

CODE = 0x80E21007


def _chip() -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "chips": [{"phy_id": 0, "health": 1, "fault_codes": [f"{CODE:08X}"]}]}
    )


async def test_a_code_in_separate_npu_codes_makes_the_chip_unhealthy(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(_chip())) as watched:
        await watched.monitor.poll_all()
        before = watched.device("Ascend910-0")
        assert before.healthy, before.reason
        assert before.faults == (Fault(CODE, FaultLevel.NotHandleFault),)

        watched.faults.set_configmap({"faultCode.json": json.dumps({"SeparateNPUCodes": [f"{CODE:08X}"]})})
        await watched.monitor.poll_all()
        after = watched.device("Ascend910-0")
        assert not after.healthy
        assert after.reason == "fault 80E21007:SeparateNPU"
        assert after.worst_level is FaultLevel.SeparateNPU
        assert after.faults == (Fault(CODE, FaultLevel.SeparateNPU),)
        assert after.judgement is not None
        assert after.judgement.chip.codes == ("80E21007",)
