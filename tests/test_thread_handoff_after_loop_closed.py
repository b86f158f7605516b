"""A library thread that finishes after the event loop closed hands nothing over, and raises nothing.

At shutdown a driver call may still hang (its thread abandoned) and the driver
may deliver fault events until the process exits: DCMI cannot unsubscribe.
When such a thread comes back, the loop it would hand its result or event to is
gone; that is the end of the story, not a traceback in the log.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading

import pytest
from fake_dcmi.players import CFakePlayer
from health_harness import monitored
from waiting import WAIT

from ascend_plugin.chip_calls import ChipCalls, ChipCallTimeout
from ascend_plugin.resilience import Backoff
from backends.fake import FakeScenario
from backends.library import FaultEvent

SEPARATE = 0x80E01801


def _complaints(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{record.name}: {record.getMessage()}"
        for record in caplog.records
        if record.levelno >= logging.WARNING
    ]


def test_a_call_abandoned_at_shutdown_that_returns_after_the_loop_closed_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    earlier = set(threading.enumerate())  # a thread another test abandoned is not this test's

    async def serve_and_stop() -> list[threading.Thread]:
        calls = ChipCalls(timeout=0.05, retry_backoff=Backoff(3600, 3600))
        with pytest.raises(ChipCallTimeout):
            await calls.call(3, "read_health", release.wait)
        calls.shutdown()
        return [
            thread
            for thread in threading.enumerate()
            if thread.name.startswith("dcmi-chip3-") and thread not in earlier
        ]

    abandoned = asyncio.run(serve_and_stop())  # the loop is closed from here on
    assert abandoned
    caplog.clear()  # what the timeout logged is not the point
    caplog.set_level(logging.DEBUG)
    release.set()  # the hung call returns at last
    for thread in abandoned:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in abandoned)
    assert _complaints(caplog) == []


def _server(faulty: bool) -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n + 1, "fault_codes": ["80E01801"] if faulty and n == 1 else []}
        for n in range(2)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def test_a_fault_event_the_driver_delivers_after_the_loop_closed_is_quiet(
    c_fake: CFakePlayer, caplog: pytest.LogCaptureFixture
) -> None:
    library = c_fake.open(_server(False))

    async def subscribe_and_stop() -> None:
        with monitored(library) as watched:
            await watched.monitor.poll_all()
            await watched.monitor.subscribe()
            assert watched.monitor.subscribed

    asyncio.run(subscribe_and_stop())  # the loop is closed; the library, still subscribed, is not
    # A later subscriber: the fake calls its subscribers in order, so once this one has an event
    # the plugin's handler has had it too, on the driver's thread, through the real C callback.
    witness: queue.Queue[FaultEvent] = queue.Queue()
    library.subscribe_faults(witness.put)
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    c_fake.update(_server(True))
    assert witness.get(timeout=WAIT).code == SEPARATE
    assert _complaints(caplog) == []
