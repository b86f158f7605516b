"""Background jobs on a chip's lane (telemetry): after the health calls, given up alone when a call hangs."""

from __future__ import annotations

import threading

import anyio
import pytest
from waiting import until

from ascend_plugin.chip_calls import (
    BackgroundCalls,
    BackgroundRefused,
    ChipCalls,
    ChipCallTimeout,
    LaneKey,
    StuckCall,
)

pytestmark = pytest.mark.anyio


async def test_a_health_call_waits_for_the_call_under_way_only() -> None:
    calls = ChipCalls(timeout=5)
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def blocked() -> str:
        started.set()
        release.wait()
        order.append("figure 0")
        return "figure 0"

    def job(lane: BackgroundCalls) -> list[str]:
        read = [lane.call("figure 0", blocked)]
        for index in range(1, 5):
            if lane.yielding:
                break
            read.append(
                lane.call(f"figure {index}", lambda i=index: order.append(f"figure {i}") or f"figure {i}")
            )
        return read

    async with anyio.create_task_group() as group:
        results: dict[str, object] = {}

        async def background() -> None:
            results["job"] = await calls.background(0, "telemetry", job, per_call=5)

        async def health() -> None:
            results["health"] = await calls.call(0, "read_health", lambda: order.append("health") or "ok")

        group.start_soon(background)
        await until(started.is_set, "the job's first call under way")
        group.start_soon(health)
        await until(lambda: calls.waiting(0) == 1, "the health call waiting")
        release.set()
    assert results == {"job": ["figure 0"], "health": "ok"}
    assert order == ["figure 0", "health"]
    calls.shutdown()


async def test_a_hung_background_call_gives_its_thread_up_and_leaves_the_lane_free() -> None:
    calls = ChipCalls(timeout=5)
    changes: list[tuple[LaneKey, StuckCall | None]] = []
    calls.on_lane_change(lambda lane, stuck: changes.append((lane, stuck)))
    observed: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, _seconds, outcome: observed.append((name, outcome)))
    release = threading.Event()
    later: list[str] = []

    def job(lane: BackgroundCalls) -> None:
        lane.call("temperature", release.wait)
        later.append(lane.call("power", lambda: "made after the job was given up"))

    with pytest.raises(
        ChipCallTimeout, match=r"driver call temperature on chip 2 did not return within 0\.05 s"
    ):
        await calls.background(2, "telemetry", job, per_call=0.05)
    # The health calls go on at once, on a fresh thread; the lane is not stuck, nobody was told so.
    assert await calls.call(2, "read_health", threading.current_thread) is not threading.current_thread()
    assert calls.stuck(2) is None
    assert changes == []
    assert calls.abandoned_threads == 1
    with pytest.raises(BackgroundRefused, match="driver call temperature on chip 2 stuck for"):
        await calls.background(2, "telemetry", lambda lane: None, per_call=0.05)
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "the given-up thread back")
    assert later == []  # no call of a given-up job starts after the one that hung
    assert (
        await calls.background(2, "telemetry", lambda lane: lane.call("voltage", lambda: 0.8), per_call=1)
        == 0.8
    )
    # The observers hear of each job as one call, and of the calls that failed.
    assert observed.count(("telemetry", "ok")) == 1
    assert observed.count(("telemetry", "timeout")) == 1
    assert ("temperature", "timeout") in observed
    assert ("voltage", "ok") not in observed
    calls.shutdown()


async def test_no_background_job_on_a_stuck_lane() -> None:
    calls = ChipCalls(timeout=0.05)
    release = threading.Event()
    with pytest.raises(ChipCallTimeout):
        await calls.call(1, "read_health", release.wait)
    with pytest.raises(BackgroundRefused, match="driver call read_health on chip 1 stuck for"):
        await calls.background(1, "telemetry", lambda lane: None, per_call=1)
    release.set()
    await until(lambda: calls.stuck(1) is None, "the lane free again")
    calls.shutdown()


async def test_a_sampling_call_may_take_its_period_more() -> None:
    calls = ChipCalls(timeout=5)

    def job(lane: BackgroundCalls) -> bool:
        return lane.call("utilization", threading.Event().wait, 0.2)  # samples for 0.2 s, longer than 0.05

    assert await calls.background(4, "telemetry", job, per_call=0.05, longer={"utilization": 30}) is False
    assert calls.abandoned_threads == 0
    calls.shutdown()
