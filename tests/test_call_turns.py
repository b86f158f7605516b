"""Jobs in turn: one chip's thread at a time, the answers handed to the loop together, no chip held up.

A health round hands each chip's job to its own thread; run in turn, each job
starts when the one before ended, from that job's thread, and the answers reach
the event loop in one hand-off. A job that keeps the turn too long (a slow or
hung driver) loses it: the others go on beside it, and a hung call still marks
only its own chip.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from ascend_plugin.call_turns import TURN_LIMIT
from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout, LaneCalls, LaneStuck
from ascend_plugin.resilience import Backoff

pytestmark = pytest.mark.anyio

CHIPS = 8


def _timed(spans: dict[int, tuple[float, float]], chip: int, work: Callable[[], object]) -> Any:
    """A job recording when its call ran, on the chip's thread."""

    def job(lane: LaneCalls) -> int:
        started = time.monotonic()
        lane.call("health", work)
        spans[chip] = (started, time.monotonic())
        return chip

    return job


def _count_hand_offs(counted: list[object]) -> None:
    loop = asyncio.get_running_loop()
    hand_over = loop.call_soon_threadsafe

    def counting(callback: Callable[..., object], *args: Any, **kwargs: Any) -> asyncio.Handle:
        counted.append(callback)
        return hand_over(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]


async def test_a_round_runs_one_chip_at_a_time_and_is_answered_in_one_hand_off() -> None:
    calls = ChipCalls(timeout=5)
    for chip in range(CHIPS):  # each lane has its thread before the round
        await calls.call(chip, "warm-up", lambda: None)
    first_may_end = threading.Event()
    spans: dict[int, tuple[float, float]] = {}
    answers: list[int] = []
    hand_offs: list[object] = []
    _count_hand_offs(hand_offs)

    async def poll(chip: int) -> None:
        work = first_may_end.wait if chip == 0 else (lambda: None)
        answers.append(await calls.run(chip, "poll", _timed(spans, chip, work), in_turn=True))

    async with anyio.create_task_group() as group:
        for chip in range(CHIPS):
            group.start_soon(poll, chip)
        await anyio.wait_all_tasks_blocked()  # every job handed over: the first runs, the rest wait
        first_may_end.set()
    assert sorted(answers) == list(range(CHIPS))
    ordered = sorted(spans.values())
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(ordered))
    assert len(hand_offs) == 1
    calls.shutdown()


async def test_jobs_submitted_in_one_pass_of_the_loop_are_answered_together_however_fast_they_end() -> None:
    """A free turn is taken once the loop's pass ends: a first job cannot end alone before the rest come."""
    calls = ChipCalls(timeout=5)
    for chip in range(CHIPS):
        await calls.call(chip, "warm-up", lambda: None)
    hand_offs: list[object] = []
    _count_hand_offs(hand_offs)
    spans: dict[int, tuple[float, float]] = {}

    async def poll(chip: int) -> None:
        if chip == 1:
            # The loop busy in the same pass, after chip 0's job was handed over: blocking on purpose.
            time.sleep(0.05)  # noqa: ASYNC251
        await calls.run(chip, "poll", _timed(spans, chip, lambda: None), in_turn=True)

    async with anyio.create_task_group() as group:
        for chip in range(CHIPS):
            group.start_soon(poll, chip)
    assert sorted(spans) == list(range(CHIPS))
    assert len(hand_offs) == 1
    calls.shutdown()


async def test_a_job_that_keeps_the_turn_lets_the_next_start_beside_it() -> None:
    calls = ChipCalls(timeout=5)
    release = threading.Event()
    quick_answered = anyio.Event()
    answered: list[str] = []

    def slow_job(lane: LaneCalls) -> str:
        lane.call("health", release.wait)
        return "slow"

    async def slow() -> None:
        answered.append(await calls.run(0, "poll", slow_job, in_turn=True))

    async def quick() -> None:
        answered.append(
            await calls.run(1, "poll", lambda lane: lane.call("health", lambda: "quick"), in_turn=True)
        )
        quick_answered.set()

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        await anyio.wait_all_tasks_blocked()  # the slow job holds the turn
        group.start_soon(quick)
        with anyio.fail_after(TURN_LIMIT * 50):  # the turn passes on after TURN_LIMIT, not at the timeout
            await quick_answered.wait()
        release.set()
    assert answered == ["quick", "slow"]
    calls.shutdown()


async def test_a_hung_call_in_a_round_marks_only_its_chip() -> None:
    calls = ChipCalls(timeout=0.5, retry_backoff=Backoff(3600, 3600))
    release = threading.Event()
    ended: list[tuple[int, str]] = []

    async def poll(chip: int, work: Callable[[], object]) -> None:
        try:
            await calls.run(chip, "poll", lambda lane: lane.call("health", work), in_turn=True)
        except ChipCallTimeout:
            ended.append((chip, "timeout"))
        except LaneStuck:
            ended.append((chip, "stuck"))
        else:
            ended.append((chip, "ok"))

    async with anyio.create_task_group() as group:
        group.start_soon(poll, 3, release.wait)
        await anyio.wait_all_tasks_blocked()
        for chip in (4, 5):
            group.start_soon(poll, chip, lambda: None)
    # The others were answered long before the hung call's timeout, which marks chip 3 alone.
    assert ended == [(4, "ok"), (5, "ok"), (3, "timeout")]
    assert [call.lane for call in calls.stuck_calls()] == [3]
    ended.clear()
    async with anyio.create_task_group() as group:  # the next round: chip 3 is refused at once
        for chip in (3, 4, 5):
            group.start_soon(poll, chip, lambda: None)
    assert sorted(ended) == [(3, "stuck"), (4, "ok"), (5, "ok")]
    release.set()
    calls.shutdown()
