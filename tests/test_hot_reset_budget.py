"""Three hot resets per chip in any 6 hours; past that the chip stays out and is named for an operator.

The window slides: what counts is the resets of the last 6 hours, whenever one
looks. Through the plugin, a chip its resets do not mend is reset three times,
then named in the manual list (the ResetInfo annotation) and left alone; six
hours later (the test moves the plugin's clock) it gets its next reset.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESTART_NPU, RigParts, node_scenario, reset_rig
from waiting import until

from ascend_plugin.hot_reset.budget import RESETS, WINDOW, ResetBudget
from ascend_plugin.hot_reset.manual import Listed

HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_three_resets_in_any_six_hours() -> None:
    clock = Clock()
    budget = ResetBudget(clock)
    assert (RESETS, WINDOW) == (3, 6 * HOUR)
    for hour in (0, 1, 2):
        clock.now = 1000.0 + hour * HOUR
        assert budget.left(7) == 3 - hour
        await budget.spend(7)
    assert budget.left(7) == 0
    assert budget.next_in(7) == 4 * HOUR  # the first reset leaves the window 6 h after it
    assert budget.left(8) == 3  # per chip
    clock.now = 1000.0 + 6 * HOUR
    assert budget.left(7) == 1  # the window slid past the first
    await budget.spend(7)
    clock.now = 1000.0 + 6.5 * HOUR
    assert budget.left(7) == 0  # not a refill of all three at once


@pytest.mark.anyio
async def test_a_chip_its_resets_do_not_mend_gets_three_then_waits_six_hours(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    stubborn = node_scenario({0: RESTART_NPU}, chip={0: {"reset_clears_faults": False}}, reset_seconds=0.1)
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        rig.write(stubborn)
        listed = await until(lambda: rig.manager.manual.get(0), "chip 0 named for an operator")
        assert listed.listed is Listed.SPENT
        assert listed.why == "3 hot resets in the last 6 hours did not mend it"
        assert rig.reset_count(0) == 3
        assert 0 not in rig.manager.waiting

        # Nothing more while the budget is spent, however often the manager looks.
        polls = rig.app.metrics.calls.latency["read_health"].calls
        await until(lambda: rig.app.metrics.calls.latency["read_health"].calls > polls + 20, "more polls")
        rig.manager.wake()
        assert rig.reset_count(0) == 3
        await rig.healthy(1, 2, 3)

        rig.advance(6 * HOUR)
        await rig.reset_done(0, count=4)
        assert rig.manager.manual.get(0) is not None  # still not mended: still named

        rig.write(node_scenario())  # mended at last (by hand): off the list
        await until(lambda: rig.manager.manual.get(0) is None, "chip 0 off the list")
        await rig.healthy(0, 1, 2, 3)
