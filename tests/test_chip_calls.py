"""The chip caller: one worker thread, a timeout per call, a circuit that opens on a hang."""

from __future__ import annotations

import threading

import pytest
from plugin_harness import until

from ascend_plugin.chip_calls import ChipCaller, ChipCallsBlocked, ChipCallTimeout, StuckCall

pytestmark = pytest.mark.anyio


async def test_results_and_errors_come_back() -> None:
    caller = ChipCaller(timeout=5)
    assert await caller.call("add", lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        await caller.call("divide", lambda: 1 / 0)
    caller.shutdown()


async def test_every_call_runs_on_the_same_thread() -> None:
    caller = ChipCaller(timeout=5)
    names = {await caller.call("name", lambda: threading.current_thread().name) for _ in range(5)}
    assert names == {"dcmi-calls"}
    assert threading.current_thread().name not in names
    caller.shutdown()


async def test_a_hung_call_opens_the_circuit_until_it_returns() -> None:
    caller = ChipCaller(timeout=0.05)
    changes: list[StuckCall | None] = []
    caller.on_circuit_change(changes.append)
    release = threading.Event()
    with pytest.raises(ChipCallTimeout, match=r"driver call health did not return within 0\.05 s"):
        await caller.call_for(("Ascend910-3",), "health", release.wait)
    assert caller.stuck is not None
    assert caller.stuck.concerns == ("Ascend910-3",)
    with pytest.raises(ChipCallsBlocked, match="driver call health is stuck"):
        await caller.call("other", lambda: 1)
    release.set()
    await until(lambda: caller.stuck is None, "circuit closed after the call returned")
    assert await caller.call("other", lambda: 1) == 1
    assert [change is None for change in changes] == [False, True]
    caller.shutdown()
