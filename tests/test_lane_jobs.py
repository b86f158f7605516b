"""Several library calls in one hand-off to a chip's thread: each is still a call of its own.

A chip's calls are each observed under their own name and outcome; a function
that makes several in one hand-off names each as a :func:`step`, held to the
timeout from its own start (a slow first call does not eat the second's time),
and a timeout names the step that overran.
"""

from __future__ import annotations

import threading
import time

import pytest
from waiting import until

from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout, step
from ascend_plugin.resilience import Backoff
from backends.errors import DcmiError

pytestmark = pytest.mark.anyio


async def test_each_call_is_observed_under_its_own_name() -> None:
    calls = ChipCalls(timeout=5)
    seen: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, seconds, outcome: seen.append((name, outcome)))

    first = await calls.call(4, "health", lambda: 1)
    with pytest.raises(DcmiError):
        await calls.call(4, "error_codes", _fails)
    assert first + await calls.call(4, "vnpus", lambda: 2) == 3
    assert seen == [("health", "ok"), ("error_codes", "-8012"), ("vnpus", "ok")]
    assert calls.stuck(4) is None
    calls.shutdown()


async def test_a_step_that_fails_is_observed_under_its_own_name() -> None:
    calls = ChipCalls(timeout=5)
    seen: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, seconds, outcome: seen.append((name, outcome)))

    def poll() -> int:
        first = step("health", lambda: 1)
        with pytest.raises(DcmiError):
            step("error_codes", _fails)
        return first + step("vnpus", lambda: 2)

    assert await calls.call(4, "poll", poll) == 3
    assert seen == [("error_codes", "-8012"), ("poll", "ok")]
    calls.shutdown()


async def test_each_step_has_the_whole_timeout_from_its_own_start() -> None:
    calls = ChipCalls(timeout=0.5)

    def poll() -> str:
        step("health", time.sleep, 0.3)
        step("error_codes", time.sleep, 0.3)  # 0.6 s into the call, but 0.3 s into this step
        return "done"

    assert await calls.call(1, "poll", poll) == "done"
    assert calls.stuck(1) is None
    calls.shutdown()


async def test_a_timeout_names_the_step_that_overran_and_marks_only_its_lane() -> None:
    calls = ChipCalls(timeout=0.1, retry_backoff=Backoff(3600, 3600))
    outcomes: list[tuple[str, str]] = []
    calls.on_call_done(lambda name, seconds, outcome: outcomes.append((name, outcome)))
    release = threading.Event()

    def poll() -> None:
        step("health", lambda: 0)
        step("vnpus", release.wait)

    with pytest.raises(ChipCallTimeout, match=r"driver call vnpus on chip 2 did not return within 0\.1 s"):
        await calls.call(2, "poll", poll)
    stuck = calls.stuck(2)
    assert stuck is not None
    assert stuck.name == "vnpus"
    assert outcomes == [("vnpus", "timeout"), ("poll", "timeout")]
    assert await calls.call(3, "health", lambda: "fine") == "fine"
    release.set()
    await until(lambda: calls.stuck(2) is None, "the lane free once the call returned")
    calls.shutdown()


def _fails() -> None:
    raise DcmiError("dcmi_get_device_errorcode_v2", -8012)
