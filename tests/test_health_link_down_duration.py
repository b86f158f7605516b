"""A RoCE link down (``81078603``) through FaultDuration: network PreSeparateNPU after 20 s, clear after 60 s.

Through the health monitor on both fakes, the link down polled on a 910B chip
(``dcmi_get_device_errorcode_v2`` lists it), the clocks moved by the test, the
built-in rules in force. The network level is the chip's second level: it is
what ``-NetworkUnhealthy`` and the network metric show, and it never changes
what the kubelet is told about the chip itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored

from ascend_plugin.fault_policy.chip import ChipJudgement
from ascend_plugin.fault_policy.faults import Fault, FaultLevel
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

LINK_DOWN = "81078603"


def _chip(*codes: str) -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "chips": [{"phy_id": 0, "fault_codes": list(codes)}]}
    )


async def _at(watched: Monitored, player: ScenarioPlayer[Any], seconds: float, *codes: str) -> ChipJudgement:
    """Move the clocks ``seconds`` on, poll with ``codes`` listed, and return the chip's judgement."""
    watched.clock.advance(seconds)
    player.update(_chip(*codes))
    await watched.monitor.poll_all()
    health = watched.device("Ascend910-0")
    assert health.healthy, f"the chip itself stays healthy: {health.reason}"
    assert health.judgement is not None
    return health.judgement


async def test_link_down_pre_separates_the_network_after_20_s_and_recovers_60_s_after_it_is_up(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_chip())) as watched:
        down = await _at(watched, any_fake, 0, LINK_DOWN)
        assert (down.network_level, down.network_healthy) == (FaultLevel.NotHandleFault, True)
        assert down.level is FaultLevel.NormalNPU
        assert watched.device("Ascend910-0").faults == (Fault(0x81078603, FaultLevel.NotHandleFault),)
        assert (await _at(watched, any_fake, 19.0, LINK_DOWN)).network_level is FaultLevel.NotHandleFault

        assert (
            await _at(watched, any_fake, 1.0, LINK_DOWN)
        ).network_level is FaultLevel.NotHandleFault  # 20 s
        timed_out = await _at(watched, any_fake, 1.0, LINK_DOWN)  # longer than 20 s
        assert (timed_out.network_level, timed_out.network_healthy) == (FaultLevel.PreSeparateNPU, False)
        assert [reason.kind.value for reason in timed_out.reasons] == ["FaultDuration"]

        up = await _at(watched, any_fake, 9.0)  # the link is up again at 30 s
        assert (up.network_level, up.network_healthy) == (FaultLevel.PreSeparateNPU, False)
        assert (await _at(watched, any_fake, 60.0)).network_level is FaultLevel.PreSeparateNPU  # up 60 s
        recovered = await _at(watched, any_fake, 1.0)  # up longer than 60 s
        assert (recovered.network_level, recovered.network_healthy) == (FaultLevel.NormalNPU, True)
        assert recovered.reasons == ()
