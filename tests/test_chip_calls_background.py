"""Background calls on a chip's lane (telemetry): beside the health calls, given up alone when one hangs."""

from __future__ import annotations

import threading

import anyio
import pytest
from waiting import until

from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout, LaneKey, LaneStuck, StuckCall, step

pytestmark = pytest.mark.anyio


async def test_a_health_call_waits_for_no_background_call() -> None:
    """A figure read that is slow (or hung, up to its own timeout) leaves the chip's health calls alone."""
    calls = ChipCalls(timeout=5)
    started, release = threading.Event(), threading.Event()

    def blocked() -> str:
        started.set()
        release.wait()
        return "figure 0"

    def read() -> list[str]:
        return [step("figure 0", blocked), *(step(f"figure {n}", lambda i=n: f"figure {i}") for n in (1, 2))]

    results: dict[str, object] = {}
    async with anyio.create_task_group() as group:

        async def background() -> None:
            results["job"] = await calls.call(0, "telemetry", read, within=5, background=True)

        group.start_soon(background)
        await until(started.is_set, "the background call's first figure under way")
        results["health"] = await calls.call(0, "read_health", lambda: "ok")
        assert "job" not in results  # answered while the figure is still being read
        release.set()
    assert results == {"job": ["figure 0", "figure 1", "figure 2"], "health": "ok"}
    calls.shutdown()


async def test_a_hung_background_call_gives_its_thread_up_and_leaves_the_lane_free() -> None:
    calls = ChipCalls(timeout=5)
    changes: list[tuple[LaneKey, StuckCall | None]] = []
    calls.on_lane_change(lambda lane, stuck: changes.append((lane, stuck)))
    observed: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, _seconds, outcome: observed.append((name, outcome)))
    release = threading.Event()
    later: list[str] = []

    def read() -> None:
        step("temperature", release.wait)
        later.append(step("power", lambda: "made after the call was given up"))

    with pytest.raises(
        ChipCallTimeout, match=r"driver call temperature on chip 2 did not return within 0\.05 s"
    ):
        await calls.call(2, "telemetry", read, within=0.05, background=True)
    # The health calls go on at once, on their own thread; the lane is not stuck, nobody was told so.
    assert await calls.call(2, "read_health", threading.current_thread) is not threading.current_thread()
    assert calls.stuck(2) is None
    assert changes == []
    assert calls.abandoned_threads == 1
    with pytest.raises(LaneStuck, match="driver call temperature on chip 2 stuck for"):
        await calls.call(2, "telemetry", lambda: None, within=0.05, background=True)
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "the given-up thread back")
    assert later == []  # no call of a given-up job starts after the one that hung
    voltage = await calls.call(
        2, "telemetry", lambda: step("voltage", lambda: 0.8), within=1, background=True
    )
    assert voltage == 0.8
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
    with pytest.raises(LaneStuck, match="driver call read_health on chip 1 stuck for"):
        await calls.call(1, "telemetry", lambda: None, within=1, background=True)
    release.set()
    await until(lambda: calls.stuck(1) is None, "the lane free again")
    calls.shutdown()


async def test_a_sampling_call_may_take_its_period_more() -> None:
    calls = ChipCalls(timeout=5)

    def read() -> bool:
        return step("utilization", threading.Event().wait, 0.2, longer=30)  # samples 0.2 s, longer than 0.05

    assert await calls.call(4, "telemetry", read, within=0.05, background=True) is False
    assert calls.abandoned_threads == 0
    calls.shutdown()
