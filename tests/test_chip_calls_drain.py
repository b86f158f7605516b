"""The chip library is unloaded only once no call of ours is inside it.

Lanes run side by side: ``close`` on the node lane does not wait for a chip's
call in flight, and unloading the library under that call crashes the process
when it returns. ``drain_chip_lanes`` refuses new chip calls and waits for the
ones in flight; a call that hangs keeps the library loaded.
"""

from __future__ import annotations

import threading

import anyio
import pytest
from waiting import until

from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls, ChipCallTimeout
from ascend_plugin.resilience import Backoff

pytestmark = pytest.mark.anyio


async def test_draining_waits_for_a_chip_call_in_flight_then_refuses_new_ones() -> None:
    calls = ChipCalls(timeout=30)
    release, started = threading.Event(), threading.Event()

    def slow_read() -> str:
        started.set()
        release.wait()
        return "read"

    drained: list[bool] = []
    async with anyio.create_task_group() as group:

        async def read() -> None:
            assert await calls.call(4, "read_health", slow_read) == "read"

        async def drain() -> None:
            drained.append(await calls.drain_chip_lanes())

        group.start_soon(read)
        await until(started.is_set, "the chip call inside the library")
        group.start_soon(drain)
        await anyio.wait_all_tasks_blocked()
        assert drained == []  # still inside: the library must stay loaded
        release.set()
    assert drained == [True]
    with pytest.raises(ChipCallError, match="driver call read_health on chip 4 refused: shutting down"):
        await calls.call(4, "read_health", lambda: "late")
    assert await calls.call(NODE, "close", lambda: "closed") == "closed"  # node-wide calls still run
    calls.shutdown()


async def test_a_hung_chip_call_keeps_the_library_loaded() -> None:
    calls = ChipCalls(timeout=0.05, retry_backoff=Backoff(3600, 3600))
    release = threading.Event()
    with pytest.raises(ChipCallTimeout):
        await calls.call(3, "read_health", release.wait)
    assert await calls.call(5, "read_health", lambda: "fine") == "fine"
    assert not await calls.drain_chip_lanes()
    release.set()
    await until(lambda: calls.abandoned_threads == 0, "the hung call returned")
    assert await calls.drain_chip_lanes()
    calls.shutdown()
