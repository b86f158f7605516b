"""Rounds: the calls of one pass of the loop, one chip's thread at a time, answered together.

A health round hands each chip's call to its own thread; run in turn, each call
starts when the one before ended, from that call's thread, and the answers reach
the event loop in one hand-off. A call that keeps the turn too long (a slow or
hung driver) loses it: the others go on beside it, and a hung call still marks
only its own chip. The turn limit is long here where a test counts hand-offs,
so that a loaded machine cannot pass the turn on early.
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
from waiting import until

from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout, LaneStuck
from ascend_plugin.resilience import Backoff
from backends.errors import DcmiError

pytestmark = pytest.mark.anyio

CHIPS = 8
NEVER = 3600.0  # a turn limit no test reaches: the turn passes on only when a call ends


def _timed(spans: dict[int, tuple[float, float]], chip: int, work: Callable[[], object]) -> Callable[[], int]:
    """A call recording when it ran, on the chip's thread."""

    def call() -> int:
        started = time.monotonic()
        work()
        spans[chip] = (started, time.monotonic())
        return chip

    return call


def _count_hand_offs(counted: list[object]) -> None:
    loop = asyncio.get_running_loop()
    hand_over = loop.call_soon_threadsafe

    def counting(callback: Callable[..., object], *args: Any, **kwargs: Any) -> asyncio.Handle:
        counted.append(callback)
        return hand_over(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]


async def _warm(calls: ChipCalls) -> None:
    for chip in range(CHIPS):  # each lane has its thread before the round
        await calls.call(chip, "warm-up", lambda: None)


async def test_a_round_runs_one_chip_at_a_time_and_is_answered_in_one_hand_off() -> None:
    calls = ChipCalls(timeout=NEVER, turn_limit=NEVER)
    await _warm(calls)
    first_may_end = threading.Event()
    spans: dict[int, tuple[float, float]] = {}
    answers: list[int] = []
    hand_offs: list[object] = []
    _count_hand_offs(hand_offs)

    async def poll(chip: int) -> None:
        work = first_may_end.wait if chip == 0 else (lambda: None)
        answers.append(await calls.call(chip, "poll", _timed(spans, chip, work)))

    async with anyio.create_task_group() as group:
        for chip in range(CHIPS):
            group.start_soon(poll, chip)
        await anyio.wait_all_tasks_blocked()  # every call queued: the first runs, the rest wait
        first_may_end.set()
    assert sorted(answers) == list(range(CHIPS))
    ordered = sorted(spans.values())
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(ordered))
    assert len(hand_offs) == 1
    calls.shutdown()


async def test_calls_queued_in_one_pass_of_the_loop_are_answered_together_however_fast_they_end() -> None:
    """A round starts once the loop's pass ends: a first call cannot end alone before the rest come."""
    calls = ChipCalls(timeout=NEVER, turn_limit=NEVER)
    await _warm(calls)
    hand_offs: list[object] = []
    _count_hand_offs(hand_offs)
    spans: dict[int, tuple[float, float]] = {}

    async def poll(chip: int) -> None:
        if chip == 1:
            # The loop busy in the same pass, after chip 0's call was queued: blocking on purpose.
            time.sleep(0.05)  # noqa: ASYNC251
        await calls.call(chip, "poll", _timed(spans, chip, lambda: None))

    async with anyio.create_task_group() as group:
        for chip in range(CHIPS):
            group.start_soon(poll, chip)
    assert sorted(spans) == list(range(CHIPS))
    assert len(hand_offs) == 1
    calls.shutdown()


async def test_errors_are_answers_of_the_round_too() -> None:
    calls = ChipCalls(timeout=NEVER, turn_limit=NEVER)
    await _warm(calls)
    hand_offs: list[object] = []
    _count_hand_offs(hand_offs)
    outcomes: dict[int, str] = {}

    def fails() -> None:
        raise DcmiError("dcmi_get_device_health", -8012)

    async def poll(chip: int) -> None:
        try:
            await calls.call(chip, "read_health", fails if chip % 2 else (lambda: None))
        except DcmiError as error:
            outcomes[chip] = str(error.code)
        else:
            outcomes[chip] = "ok"

    async with anyio.create_task_group() as group:
        for chip in range(CHIPS):
            group.start_soon(poll, chip)
    assert outcomes == {chip: "-8012" if chip % 2 else "ok" for chip in range(CHIPS)}
    assert len(hand_offs) == 1
    calls.shutdown()


async def test_a_call_that_keeps_the_turn_lets_the_next_start_beside_it() -> None:
    calls = ChipCalls(timeout=NEVER, turn_limit=0.05)
    release = threading.Event()
    answered: list[str] = []

    async def slow() -> None:
        answered.append(await calls.call(0, "poll", lambda: release.wait() and "slow"))

    async def quick() -> None:
        answered.append(await calls.call(1, "poll", lambda: "quick"))

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        group.start_soon(quick)  # queued in the same pass, behind the slow one
        await until(lambda: answered == ["quick"], "the quick call answered while the slow one runs")
        release.set()
    assert answered == ["quick", "slow"]
    calls.shutdown()


async def test_a_hung_call_in_a_round_marks_only_its_chip() -> None:
    calls = ChipCalls(timeout=5, turn_limit=0.05, retry_backoff=Backoff(3600, 3600))
    release = threading.Event()
    ended: list[tuple[int, str]] = []

    async def poll(chip: int, work: Callable[[], object]) -> None:
        try:
            await calls.call(chip, "poll", work)
        except ChipCallTimeout:
            ended.append((chip, "timeout"))
        except LaneStuck:
            ended.append((chip, "stuck"))
        else:
            ended.append((chip, "ok"))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(poll, 3, release.wait)  # first in the round: it holds the turn, then hangs
            for chip in (4, 5):
                group.start_soon(poll, chip, lambda: None)
        # The others were answered long before the hung call's timeout, which marks chip 3 alone.
        assert sorted(ended[:2]) == [(4, "ok"), (5, "ok")]  # in either order: each has its own thread
        assert ended[2:] == [(3, "timeout")]
        assert [call.lane for call in calls.stuck_calls()] == [3]
        ended.clear()
        async with anyio.create_task_group() as group:  # the next round: chip 3 is refused at once
            for chip in (3, 4, 5):
                group.start_soon(poll, chip, lambda: None)
        assert sorted(ended) == [(3, "stuck"), (4, "ok"), (5, "ok")]
    finally:
        release.set()
    await until(lambda: calls.abandoned_threads == 0, "the hung call returned")
    calls.shutdown()
