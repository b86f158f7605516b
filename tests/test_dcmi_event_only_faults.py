"""Fault events the driver delivers without the code ever showing in dcmi_get_device_errorcode_v2.

A scenario's per-chip ``events`` are delivered through the subscription by both
fakes, each once (its serial number tells it apart), whatever ``fault_codes``
says; codes appearing in ``fault_codes`` still raise their own events.
"""

from __future__ import annotations

import logging
import queue
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer

from backends.fake import FakeScenario
from backends.library import DeviceLibrary, FaultEvent

WAIT = 10.0  # generous: events arrive within tens of milliseconds


def _server(events: list[dict[str, Any]], codes: tuple[str, ...] = ()) -> FakeScenario:
    """Four 910B3 chips in slots 1, 3, 5, 7, logic ids opposite to physical ids; the third has the events."""
    chips: list[dict[str, Any]] = [
        {"phy_id": n, "card_id": 2 * n + 1, "logic_id": 3 - n, "fault_severity": 1} for n in range(4)
    ]
    chips[2] |= {"events": events, "fault_codes": list(codes)}
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _subscribed(
    player: ScenarioPlayer[Any], scenario: FakeScenario
) -> tuple[DeviceLibrary, queue.Queue[FaultEvent]]:
    library = player.open(scenario)
    events: queue.Queue[FaultEvent] = queue.Queue()
    library.subscribe_faults(events.put)
    return library, events


def _summary(event: FaultEvent) -> tuple[int, int, int, int, int]:
    return (event.logic_id, event.code, event.severity, event.assertion, event.serial)


def test_an_event_arrives_though_no_fault_code_says_so(any_fake: ScenarioPlayer[Any]) -> None:
    library, events = _subscribed(any_fake, _server([]))
    any_fake.update(_server([{"serial": 41, "code": "80E01801", "severity": 3, "assertion": 1}]))
    event = events.get(timeout=WAIT)
    assert _summary(event) == (1, 0x80E01801, 3, 1, 41)
    assert library.error_codes(5, 0) == []  # polling never sees it


def test_each_event_is_delivered_once(any_fake: ScenarioPlayer[Any]) -> None:
    first = {"serial": 1, "code": "80C98006", "assertion": 2}
    _, events = _subscribed(any_fake, _server([]))
    any_fake.update(_server([first]))
    assert _summary(events.get(timeout=WAIT)) == (
        1,
        0x80C98006,
        1,
        2,
        1,
    )  # severity: the chip's fault_severity
    any_fake.update(_server([first]))  # the same file again (a new inode): nothing new to deliver
    any_fake.update(_server([first, {"serial": 2, "code": "80C98006", "assertion": 0}]))
    # The next event is the new serial, not the first one again.
    assert _summary(events.get(timeout=WAIT)) == (1, 0x80C98006, 1, 0, 2)
    any_fake.update(_server([]))
    any_fake.update(_server([{"serial": 3, "code": "80E18005"}]))
    assert events.get(timeout=WAIT).serial == 3  # dropping events from the file raises nothing


def test_events_already_in_the_file_are_delivered_on_subscription(any_fake: ScenarioPlayer[Any]) -> None:
    _, events = _subscribed(
        any_fake, _server([{"serial": 9, "code": "80E01801"}, {"serial": 8, "code": "8C084E00"}])
    )
    assert [events.get(timeout=WAIT).serial for _ in range(2)] == [9, 8]  # in the file's order


def test_fault_codes_still_raise_their_own_events(any_fake: ScenarioPlayer[Any]) -> None:
    _, events = _subscribed(any_fake, _server([]))
    any_fake.update(_server([{"serial": 5, "code": "81078603", "severity": 0}], codes=("80E01801",)))
    received = {_summary(events.get(timeout=WAIT)) for _ in range(2)}
    assert received == {(1, 0x80E01801, 1, 1, 0), (1, 0x81078603, 0, 1, 5)}


def test_a_handler_that_raises_loses_that_event_only(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture
) -> None:
    library = any_fake.open(_server([]))
    events: queue.Queue[FaultEvent] = queue.Queue()
    gone = RuntimeError("the event loop is gone")

    def handler(event: FaultEvent) -> None:
        if event.serial == 1:
            raise gone
        events.put(event)

    library.subscribe_faults(handler)
    with caplog.at_level(logging.ERROR):
        any_fake.update(_server([{"serial": 1, "code": "80E01801"}]))
        any_fake.update(_server([{"serial": 1, "code": "80E01801"}, {"serial": 2, "code": "80E01801"}]))
        assert events.get(timeout=WAIT).serial == 2
    # Logged with its traceback, at ERROR, by whichever library delivered it.
    assert [
        record.levelno for record in caplog.records if record.exc_info and record.exc_info[1] is gone
    ] == [logging.ERROR]
