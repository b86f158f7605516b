"""Chip calls: a worker thread per lane, a timeout per call, a stuck lane that holds up nobody else."""

from __future__ import annotations

import threading

import anyio
import pytest
from health_harness import FakeClock
from waiting import WAIT, until

from ascend_plugin.chip_calls import NODE, ChipCalls, ChipCallTimeout, LaneKey, LaneStuck, StuckCall
from ascend_plugin.resilience import Backoff

pytestmark = pytest.mark.anyio


def _thread_name() -> str:
    return threading.current_thread().name


async def test_results_and_errors_come_back() -> None:
    calls = ChipCalls(timeout=5)
    assert await calls.call(0, "add", lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        await calls.call(NODE, "divide", lambda: 1 / 0)
    calls.shutdown()


async def test_a_lane_keeps_one_thread_and_lanes_do_not_share() -> None:
    calls = ChipCalls(timeout=5)
    chip_0 = {await calls.call(0, "name", _thread_name) for _ in range(5)}
    chip_1 = {await calls.call(1, "name", _thread_name) for _ in range(5)}
    node = {await calls.call(NODE, "name", _thread_name) for _ in range(5)}
    assert len(chip_0) == len(chip_1) == len(node) == 1
    assert len(chip_0 | chip_1 | node) == 3
    assert threading.current_thread().name not in chip_0 | chip_1 | node
    calls.shutdown()


async def test_a_hung_call_blocks_its_lane_only() -> None:
    calls = ChipCalls(timeout=0.05, retry_backoff=Backoff(3600, 3600))
    changes: list[tuple[LaneKey, StuckCall | None]] = []
    calls.on_lane_change(lambda lane, stuck: changes.append((lane, stuck)))
    release = threading.Event()
    with pytest.raises(ChipCallTimeout, match=r"driver call health on chip 3 did not return within 0\.05 s"):
        await calls.call(3, "health", release.wait)
    stuck = calls.stuck(3)
    assert stuck is not None
    assert (stuck.name, stuck.lane, stuck.attempts) == ("health", 3, 1)
    with pytest.raises(LaneStuck, match="driver call health on chip 3 stuck for"):
        await calls.call(3, "other", lambda: 1)
    # Every other chip, and the node lane, answer as if nothing happened.
    assert await calls.call(2, "health", lambda: "fine") == "fine"
    assert await calls.call(NODE, "card list", lambda: [0]) == [0]
    assert calls.stuck(None) is None
    assert [call.lane for call in calls.stuck_calls()] == [3]
    release.set()
    await until(lambda: calls.stuck(3) is None, "lane free after the call returned")
    assert await calls.call(3, "other", lambda: 1) == 1
    assert [(lane, stuck is None) for lane, stuck in changes] == [(3, False), (3, True)]
    calls.shutdown()


async def test_a_stuck_lane_retries_with_backoff_on_a_fresh_thread() -> None:
    clock = FakeClock()
    calls = ChipCalls(timeout=0.05, retry_backoff=Backoff(1.0, 60.0), clock=clock)
    release = threading.Event()
    hung_on: list[str] = []

    def hang() -> None:
        hung_on.append(_thread_name())
        release.wait()

    with pytest.raises(ChipCallTimeout):
        await calls.call(5, "health", hang)
    with pytest.raises(LaneStuck, match="next try in 1 s"):
        await calls.call(5, "health", hang)  # not due yet: refused at once, nothing run
    assert len(hung_on) == 1
    clock.advance(1.0)
    with pytest.raises(ChipCallTimeout):
        await calls.call(5, "health", hang)  # due: tried again, on a new thread, and hangs again
    assert len(set(hung_on)) == 2
    stuck = calls.stuck(5)
    assert stuck is not None
    assert stuck.attempts == 2
    assert stuck.retry_at == clock.now + 2.0  # the backoff doubled
    clock.advance(2.0)
    # Two threads of this lane are stuck: the per-lane cap stops a third however long it waits.
    with pytest.raises(LaneStuck):
        await calls.call(5, "health", hang)
    assert len(hung_on) == 2
    assert calls.abandoned_threads == 2
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "abandoned threads returned")
    assert calls.stuck(5) is None
    calls.shutdown()


async def test_abandoned_threads_are_capped_for_the_whole_process() -> None:
    clock = FakeClock()
    calls = ChipCalls(timeout=0.02, retry_backoff=Backoff(1.0, 1.0), max_abandoned=3, clock=clock)
    release = threading.Event()
    for lane in range(3):
        with pytest.raises(ChipCallTimeout):
            await calls.call(lane, "health", release.wait)
    clock.advance(10)
    with pytest.raises(LaneStuck):
        await calls.call(0, "health", release.wait)  # due, but the process holds 3 stuck threads
    assert calls.abandoned_threads == 3
    # A lane that is not stuck is not refused: the cap only stops retries.
    assert await calls.call(7, "health", lambda: 7) == 7
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "abandoned threads returned")
    calls.shutdown()


async def test_a_lane_at_a_thread_cap_has_no_next_try_until_a_hung_call_returns() -> None:
    """Due or not, a capped lane waits for a thread to come back, and is told when one does."""
    clock = FakeClock()
    calls = ChipCalls(timeout=0.02, retry_backoff=Backoff(1.0, 1.0), max_abandoned=2, clock=clock)
    told: list[tuple[object, object]] = []
    calls.on_lane_change(lambda lane, stuck: told.append((lane, stuck)))
    first, second = threading.Event(), threading.Event()
    with pytest.raises(ChipCallTimeout):
        await calls.call(0, "health", first.wait)
    stuck = calls.stuck(0)
    assert stuck is not None
    assert calls.next_try(0) == stuck.retry_at  # under the caps: its retry
    with pytest.raises(ChipCallTimeout):
        await calls.call(1, "health", second.wait)
    clock.advance(10)  # both retries due, but the process holds its 2 abandoned threads
    assert (calls.next_try(0), calls.next_try(1), calls.next_try(2)) == (None, None, None)
    told.clear()
    second.set()  # lane 1's call returns: a place under the process's cap, told to lane 0 too
    await until(lambda: calls.abandoned_threads == 1, "lane 1's thread back")
    await until(lambda: (0, stuck) in told and (1, None) in told, "both lanes told")
    assert calls.next_try(0) == stuck.retry_at
    first.set()
    await until(lambda: calls.abandoned_threads == 0, "lane 0's thread back")
    calls.shutdown()


async def test_a_retry_that_answers_frees_the_lane() -> None:
    clock = FakeClock()
    calls = ChipCalls(timeout=0.05, retry_backoff=Backoff(1.0, 60.0), clock=clock)
    release = threading.Event()
    with pytest.raises(ChipCallTimeout):
        await calls.call(1, "health", release.wait)
    clock.advance(1.0)
    assert await calls.call(1, "health", lambda: 0) == 0  # the chip answers on a fresh thread
    assert calls.stuck(1) is None
    assert calls.abandoned_threads == 1  # the first thread is still inside the library
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "the first call returned too")
    calls.shutdown()


async def test_an_error_is_an_answer() -> None:
    calls = ChipCalls(timeout=5)
    with pytest.raises(RuntimeError):
        await calls.call(0, "health", lambda: (_ for _ in ()).throw(RuntimeError("no")))
    assert calls.stuck(0) is None
    calls.shutdown()


async def test_a_hung_call_whose_caller_was_cancelled_still_makes_its_lane_stuck() -> None:
    """The deadline is the lane's, not the caller's: a supervised restart cannot leave a hang unseen."""
    calls = ChipCalls(timeout=0.2, retry_backoff=Backoff(3600, 3600))
    changes: list[tuple[LaneKey, StuckCall | None]] = []
    calls.on_lane_change(lambda lane, stuck: changes.append((lane, stuck)))
    release, started = threading.Event(), threading.Event()

    def hang() -> None:
        started.set()
        release.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(calls.call, 3, "read_health", hang)
        await until(started.is_set, "the call inside the library")
        group.cancel_scope.cancel()  # the caller goes before the call's timeout
    await until(lambda: calls.stuck(3) is not None, "the lane stuck without anyone waiting")
    stuck = calls.stuck(3)
    assert stuck is not None
    assert stuck.overran == "driver call read_health did not return within 0.2 s"
    assert [lane for lane, _ in changes] == [3]
    with pytest.raises(LaneStuck):
        await calls.call(3, "read_health", lambda: 0)
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "the hung call returned")
    calls.shutdown()


async def test_a_call_queued_behind_a_hang_has_its_deadline_from_when_it_was_queued() -> None:
    """It never starts, yet its caller hears by its deadline: refused once the hung call's deadline passed."""
    calls = ChipCalls(timeout=0.2, retry_backoff=Backoff(3600, 3600))
    release, started = threading.Event(), threading.Event()

    def hang() -> None:
        started.set()
        release.wait()

    ran: list[str] = []
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(calls.call, 3, "read_health", hang)
            await until(started.is_set, "the first call inside the library")
            group.cancel_scope.cancel()
        with (
            anyio.fail_after(WAIT),
            pytest.raises(LaneStuck, match="driver call read_health on chip 3 stuck"),
        ):
            await calls.call(3, "vnpus", lambda: ran.append("vnpus"))
        assert calls.abandoned_threads == 1
    finally:
        release.set()
    await until(lambda: calls.abandoned_threads == 0, "the hung call returned")
    assert ran == []  # the queued call never ran on the abandoned thread
    calls.shutdown()
