"""PreSeparateNPU is Healthy while a pod holds the chip and Unhealthy once it is free (Huawei's rule).

Through the running health monitor on both fakes, with ``8118043C`` (in
Huawei's ``PreSeparateNPUCodes``, no escalation rule) polled on the chip. The
chips pods hold come from :class:`~ascend_plugin.holdings.held.HeldChips`;
a change there is judged at once, without waiting for a poll (the polls are an
hour apart here). Until the holdings are known at all, no chip counts as held.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored, no_kubelet, watching
from waiting import until

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.monitor import HealthPolicy
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

PRE_SEPARATE = "8118043C"
HOURLY = HealthPolicy(interval=3600.0)


def _chips() -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n + 1, "fault_codes": [PRE_SEPARATE] if n == 0 else []} for n in range(2)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


async def test_pre_separate_is_healthy_while_held_and_unhealthy_once_free(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_chips()), policy=HOURLY) as watched:
        watched.held.also_held(frozenset({0}))
        await watched.monitor.poll_all()
        held = watched.device("Ascend910-0")
        assert held.healthy, held.reason
        assert held.worst_level is FaultLevel.PreSeparateNPU
        async with watching(watched):
            watched.held.also_held(frozenset({1}))  # the job on chip 0 ended
            await until(lambda: not watched.device("Ascend910-0").healthy, "unhealthy once free")
            free = watched.device("Ascend910-0")
            assert free.reason == (
                "fault 8118043C:PreSeparateNPU; "
                "no pod holds the chip (PreSeparateNPU is healthy only while one does)"
            )
            assert watched.device("Ascend910-1").healthy  # held, and without faults
            watched.held.also_held(frozenset({0, 1}))
            await until(lambda: watched.device("Ascend910-0").healthy, "healthy while held again")


async def test_before_the_holdings_are_known_a_pre_separated_chip_counts_as_free(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_chips()), policy=HOURLY) as watched:
        watched.monitor.held = no_kubelet()  # the kubelet has not answered yet
        await watched.monitor.poll_all()
        assert not watched.device("Ascend910-0").healthy
        assert watched.device("Ascend910-1").healthy
