"""When the telemetry reads: each figure one interval after it was due, rounds between the health ticks.

On the pure-Python fake, through the collector's own rounds (``read_due``) on a
clock the test moves. A round begins a little after its figures fell due (the
daemon starts rounds midway between two health ticks): the next read is due
one interval after the last was *due*, so the cadence does not stretch by that
delay every round. A figure read over an interval late is due one interval
after that round, not at once again.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored
from waiting import until

from ascend_plugin.inventory.monitor import HealthPolicy
from ascend_plugin.telemetry.collector import TelemetryCollector, TelemetryPolicy
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

NODE = FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0, "card_id": 1}]})
POLICY = TelemetryPolicy(interval=5.0, slow_interval=60.0)


async def test_a_round_that_starts_late_does_not_stretch_the_interval(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(NODE)) as watched:
        jobs: list[str] = []
        watched.calls.on_call_done(lambda name, _seconds, _outcome: jobs.append(name))
        collector = TelemetryCollector(
            watched.backend, watched.calls, watched.inventory, lambda: POLICY, clock=watched.clock
        )
        await collector.read_due()  # everything is due at first
        assert jobs.count("telemetry") == 1
        for round_number in range(1, 5):
            # Each round 0.4 s after its figures fell due: at 5.4, 10.4, 15.4, 20.4 s after the first.
            watched.clock.advance(5.0 if round_number > 1 else 5.4)
            await collector.read_due()
            assert jobs.count("telemetry") == 1 + round_number, f"round {round_number} read nothing"
        watched.clock.advance(4.5)  # 24.9 s: the next is due at 25 s, not at 25.4 s
        await collector.read_due()
        assert jobs.count("telemetry") == 5
        watched.clock.advance(0.1)
        await collector.read_due()
        assert jobs.count("telemetry") == 6


async def test_a_figure_read_long_after_it_was_due_is_next_due_one_interval_later(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(NODE)) as watched:
        jobs: list[str] = []
        watched.calls.on_call_done(lambda name, _seconds, _outcome: jobs.append(name))
        collector = TelemetryCollector(
            watched.backend, watched.calls, watched.inventory, lambda: POLICY, clock=watched.clock
        )
        await collector.read_due()
        watched.clock.advance(17.0)  # three intervals late: read once, not three times in a row
        await collector.read_due()
        await collector.read_due()
        assert jobs.count("telemetry") == 2
        watched.clock.advance(4.9)
        await collector.read_due()
        assert jobs.count("telemetry") == 2
        watched.clock.advance(0.1)
        await collector.read_due()
        assert jobs.count("telemetry") == 3


async def test_rounds_start_midway_between_the_health_ticks(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(NODE), policy=HealthPolicy(interval=1.0)) as watched:
        assert watched.monitor.between_ticks(123.0) == 123.0  # no tick yet: at once
        await watched.monitor.poll_all()
        async with anyio.create_task_group() as group:
            group.start_soon(watched.monitor.run)
            now = anyio.current_time()
            await until(lambda: watched.monitor.between_ticks(now + 0.25) != now + 0.25, "the ticks begun")
            tick = watched.monitor.between_ticks(now) - 0.5  # a tick: the poll round's
            assert watched.monitor.between_ticks(tick) == tick + 0.5
            assert watched.monitor.between_ticks(tick + 0.5) == tick + 0.5
            assert watched.monitor.between_ticks(tick + 0.51) == tick + 1.5
            assert watched.monitor.between_ticks(tick + 3.2) == tick + 3.5
            group.cancel_scope.cancel()
