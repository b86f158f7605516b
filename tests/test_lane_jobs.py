"""Lane jobs: several calls in one hand-off to a chip's thread, each call still its own call.

A job's calls are each observed under their own name and outcome, each is held
to the timeout from its own start (a slow first call does not eat the second's
time), and a timeout names the call that overran.
"""

from __future__ import annotations

import threading
import time

import pytest
from waiting import until

from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout, LaneCalls
from ascend_plugin.resilience import Backoff
from backends.errors import DcmiError

pytestmark = pytest.mark.anyio


async def test_each_call_of_a_job_is_observed_under_its_own_name() -> None:
    calls = ChipCalls(timeout=5)
    seen: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, seconds, outcome: seen.append((name, outcome)))

    def job(lane: LaneCalls) -> int:
        first = lane.call("health", lambda: 1)
        with pytest.raises(DcmiError):
            lane.call("error_codes", _fails)
        return first + lane.call("vnpus", lambda: 2)

    assert await calls.run(4, "poll", job) == 3
    assert seen == [("health", "ok"), ("error_codes", "-8012"), ("vnpus", "ok")]
    assert calls.stuck(4) is None
    calls.shutdown()


async def test_each_call_has_the_whole_timeout_from_its_own_start() -> None:
    calls = ChipCalls(timeout=0.3)

    def job(lane: LaneCalls) -> str:
        lane.call("health", time.sleep, 0.2)
        lane.call("error_codes", time.sleep, 0.2)  # 0.4 s into the job, but 0.2 s into this call
        return "done"

    assert await calls.run(1, "poll", job) == "done"
    assert calls.stuck(1) is None
    calls.shutdown()


async def test_a_timeout_names_the_call_that_overran_and_marks_only_its_lane() -> None:
    calls = ChipCalls(timeout=0.1, retry_backoff=Backoff(3600, 3600))
    outcomes: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, seconds, outcome: outcomes.append((name, outcome)))
    release = threading.Event()

    def job(lane: LaneCalls) -> None:
        lane.call("health", lambda: 0)
        lane.call("vnpus", release.wait)

    with pytest.raises(ChipCallTimeout, match=r"driver call vnpus on chip 2 did not return within 0\.1 s"):
        await calls.run(2, "poll", job)
    stuck = calls.stuck(2)
    assert stuck is not None
    assert stuck.name == "vnpus"
    assert outcomes == [("health", "ok"), ("vnpus", "timeout")]
    assert await calls.call(3, "health", lambda: "fine") == "fine"
    release.set()
    await until(lambda: calls.stuck(2) is None, "the lane free once the call returned")
    calls.shutdown()


def _fails() -> None:
    raise DcmiError("dcmi_get_device_errorcode_v2", -8012)
