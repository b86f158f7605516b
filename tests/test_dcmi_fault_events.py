"""Fault subscription through the binding: the driver's thread calls back with DCMI events, decoded.

The C fake raises an event from its own thread whenever a chip's fault codes
appear (assertion 1) or clear (assertion 0) in the scenario, as the driver does.
"""

from __future__ import annotations

import logging
import queue
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from log_records import records

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import FaultEvent

WAIT = 10.0  # generous: events arrive within tens of milliseconds


def _server(codes: list[str], severity: int = 3) -> FakeScenario:
    """Four 910B3 chips in slots 1, 3, 5, 7; logic ids run opposite to physical ids; faults on the third."""
    chips: list[dict[str, Any]] = [
        {"phy_id": n, "card_id": 2 * n + 1, "logic_id": 3 - n, "fault_severity": severity} for n in range(4)
    ]
    chips[2]["fault_codes"] = codes
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _next(events: queue.Queue[FaultEvent]) -> FaultEvent:
    return events.get(timeout=WAIT)


def test_faults_raised_and_cleared_arrive_as_events(c_fake: CFakePlayer) -> None:
    library = c_fake.open(_server([]))
    events: queue.Queue[FaultEvent] = queue.Queue()
    library.subscribe_faults(events.put)

    c_fake.update(_server(["80E01801"]))
    raised = _next(events)
    assert (raised.logic_id, raised.code, raised.severity, raised.assertion) == (1, 0x80E01801, 3, 1)

    c_fake.update(_server([]))
    cleared = _next(events)
    assert (cleared.logic_id, cleared.code, cleared.assertion) == (1, 0x80E01801, 0)


@pytest.mark.parametrize("chip_name", ["310", "310B1", "310B4", "310P3", "310P1"])
def test_inference_chips_do_not_support_subscription(c_fake: CFakePlayer, chip_name: str) -> None:
    library = c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    with pytest.raises(DcmiError) as raised:
        library.subscribe_faults(lambda event: None)
    assert (raised.value.function, raised.value.code) == ("dcmi_subscribe_fault_event", -8255)


def test_a_handler_that_raises_loses_one_event_not_the_subscription(
    c_fake: CFakePlayer, caplog: pytest.LogCaptureFixture
) -> None:
    library = c_fake.open(_server([]))
    events: queue.Queue[FaultEvent] = queue.Queue()
    gone = RuntimeError("the event loop is gone")

    def handler(event: FaultEvent) -> None:
        if event.code == 0x80E01801:
            raise gone
        events.put(event)

    library.subscribe_faults(handler)
    with caplog.at_level(logging.ERROR, logger="backends.dcmi.library"):
        c_fake.update(_server(["80E01801"]))
        c_fake.update(_server(["80E01801", "80C98006"]))
        assert _next(events).code == 0x80C98006
    (failed,) = records(caplog, "backends.dcmi.library", level=logging.ERROR)
    assert failed.exc_info is not None
    assert failed.exc_info[1] is gone  # with its traceback


def test_after_close_events_are_dropped(c_fake: CFakePlayer) -> None:
    library = c_fake.open(_server([]))
    delivered: queue.Queue[FaultEvent] = queue.Queue()
    library.subscribe_faults(delivered.put)
    library.close()

    # The fake calls its subscribers in the order they came: once a later one has
    # the event, the closed subscription's callback has been called too.
    witness = c_fake.open()
    seen: queue.Queue[FaultEvent] = queue.Queue()
    witness.subscribe_faults(seen.put)
    c_fake.update(_server(["80E01801"]))
    assert _next(seen).code == 0x80E01801
    assert delivered.empty()
