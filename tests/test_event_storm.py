"""A fault-event storm: coalesced per chip in bounded memory, a line per chip per interval, true health after.

The storms come from the fake drivers (a chip's ``storm`` in the scenario), on
both fakes: the Python fake calls the subscription's handler from its thread,
the C fake through the real cffi callback from its own. Polls are never run
here, so only the events decide.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored
from hypothesis import given
from hypothesis import strategies as st
from waiting import WAIT, until

from ascend_plugin.fault_policy.config import base_config, fault_config
from ascend_plugin.fault_policy.faults import FaultLevel, Observation
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.inventory.damping import DampingPolicy
from ascend_plugin.inventory.fault_events import Arrival, Batch, ChipBurst, EventInbox
from ascend_plugin.inventory.monitor import HealthPolicy
from backends.fake import FakeScenario
from backends.library import FaultEvent

pytestmark = pytest.mark.anyio

# SeparateNPU and RestartNPU codes without FaultFrequency rules (a storm of one with a rule escalates it for
# good, as it should: tests/test_health_frequency_escalation.py), and the RoCE link down.
SEPARATE, RESTART, LINK = 0x80818C00, 0x40F84E00, 0x81078603
RECOVER, RAISE, ONE_OFF = 0, 1, 2
INTERVAL = 0.5  # the fault-event log's interval in these tests (seconds)
HOLD = 30.0
POLICY = HealthPolicy(damping=DampingPolicy(flap_threshold=3, flap_window=60.0, flap_hold=HOLD))
MONITOR_LOG = "ascend_plugin.inventory.monitor"


def _steps(*steps: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"code": f"{code:08X}", "assertion": assertion} for code, assertion in steps]


def _storm(count: int, *steps: tuple[int, int], rate: float = 50_000.0) -> dict[str, Any]:
    return {"serial": 1, "rate": rate, "count": count, "steps": _steps(*steps)}


def _server(storms: dict[int, dict[str, Any]] | None = None) -> FakeScenario:
    chips = [{"phy_id": n, "card_id": n + 1, "storm": (storms or {}).get(n)} for n in range(4)]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _event_lines(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """The fault-event lines (they, and only they, carry a ``suppressed`` count)."""
    return [record for record in records if hasattr(record, "suppressed")]


def _accounted(records: list[logging.LogRecord], device: str | None = None) -> int:
    """Events the log accounts for: each first line's ``events`` plus each summary's ``suppressed``."""
    lines = [
        line for line in _event_lines(records) if device is None or getattr(line, "device", "") == device
    ]
    return sum(getattr(line, "events", 0) + line.suppressed for line in lines)


async def _subscribed(watched: Monitored) -> None:
    await watched.monitor.poll_all()
    await watched.monitor.subscribe()
    assert watched.monitor.subscribed


# -- the log ------------------------------------------------------------------------------


class _FirstLines(logging.Handler):
    """Tells, across threads, when each device's first fault-event line (``suppressed`` 0) was logged."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: defaultdict[str, threading.Event] = defaultdict(threading.Event)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "suppressed", None) == 0:
            self.logged[getattr(record, "device", "")].set()


def _first_event_alone(watched: Monitored, monkeypatch: pytest.MonkeyPatch) -> None:
    """Have the driver's event thread wait, after each chip's first event, until the loop has logged it.

    The storm's second event follows its first 10 ms later: a loop slower than that under load would
    take both in its first burst. A driver's thread that waits for its handler is one a real driver
    may have, and the first event then comes alone whatever the load.
    """
    first_lines = _FirstLines()
    logger = logging.getLogger(MONITOR_LOG)
    monkeypatch.setattr(logger, "handlers", [*logger.handlers, first_lines])
    subscribe = watched.backend.subscribe_faults
    inventory = watched.inventory

    def gated(handler: Callable[[FaultEvent], None]) -> bool:
        seen: set[int] = set()

        def first_alone(event: FaultEvent) -> None:
            handler(event)
            state = inventory.by_logic_id(event.logic_id)
            if state is not None and event.logic_id not in seen:
                seen.add(event.logic_id)
                first_lines.logged[inventory.table.chip_id(state.phy_id)].wait(WAIT)

        return subscribe(first_alone)

    monkeypatch.setattr(watched.backend, "subscribe_faults", gated)


async def test_a_storm_costs_each_chip_a_line_per_interval_and_every_event_is_counted(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger=MONITOR_LOG)
    with monitored(any_fake.open(_server()), policy=POLICY, event_log_interval=INTERVAL) as watched:
        _first_event_alone(watched, monkeypatch)
        await _subscribed(watched)
        storm = _storm(5000, (SEPARATE, RAISE), (SEPARATE, RECOVER), (LINK, RAISE))
        any_fake.update(_server({0: storm, 1: storm}))
        await until(lambda: _accounted(caplog.records) == 10_000, "every event accounted for in the log")

    for device in ("Ascend910-0", "Ascend910-1"):
        lines = [line for line in _event_lines(caplog.records) if line.device == device]
        first, summaries = lines[0], lines[1:]
        assert (first.suppressed, first.logic_id, first.levelname) == (0, int(device[-1]), "INFO")
        assert (first.events, first.codes) == (1, ["80818C00"])  # the storm's first event, alone, at once
        assert summaries, "events beyond the first burst are summarised"
        assert all(line.suppressed > 0 for line in summaries)
        assert {code for line in lines for code in line.codes} == {"80818C00", "81078603"}
        # One summary per interval, for as long as the chip's events kept coming.
        spread = lines[-1].created - first.created
        assert len(summaries) <= spread / INTERVAL + 1.5
    assert len(_event_lines(caplog.records)) < 30
    assert _accounted(caplog.records, "Ascend910-2") == 0  # the quiet chips log nothing


# -- memory ---------------------------------------------------------------------------------


async def test_events_arriving_while_the_loop_is_busy_wait_in_one_bounded_burst(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_server()), policy=POLICY, event_log_interval=INTERVAL) as watched:
        await _subscribed(watched)
        inbox = watched.monitor.inbox
        assert inbox is not None
        total = 30_000
        storm = _storm(total, (SEPARATE, RAISE), (RESTART, RAISE), (SEPARATE, RECOVER), rate=300_000)
        wakeups = inbox.wakeups
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            any_fake.update(_server({0: storm}))
            # This test holds the event loop while the driver's thread delivers the whole storm, as a
            # loop busy elsewhere would: whatever the driver sends meanwhile must wait in bounded memory.
            deadline = time.monotonic() + WAIT
            while inbox.received < total and time.monotonic() < deadline:
                time.sleep(0.002)  # noqa: ASYNC251 - blocking the loop is the point
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert inbox.received == total
        assert inbox.wakeups - wakeups == 1, "one wake-up of the loop for everything that piled up"
        # A queued callback per event holds about 430 bytes (a handle, an event): 13 MB here.
        assert grown < 512 * 1024, f"{grown} bytes held for {total} events"
        # The last event, step (total - 1) % 3 = 2: SEPARATE recovered, RESTART still raised.
        await until(
            lambda: watched.device("Ascend910-0").reason == "fault 40F84E00:RestartNPU (event)",
            "the chip as its last events left it",
        )


def test_the_inbox_wakes_the_loop_once_per_batch_and_hands_over_each_chips_burst() -> None:
    batches: list[Batch] = []
    loop = asyncio.new_event_loop()
    inbox = EventInbox(loop, batches.append, logic_ids=[0, 1], clock=time.monotonic)

    def driver() -> None:
        for n in range(10_000):
            inbox.put(FaultEvent(n % 2, SEPARATE, 2, RAISE if n % 4 < 2 else RECOVER))
        inbox.put(FaultEvent(9, LINK, 1, RAISE))  # a logic id the node does not have

    thread = threading.Thread(target=driver, name="fake-driver")
    thread.start()
    thread.join()
    assert (inbox.received, inbox.wakeups) == (10_001, 1)
    loop.run_until_complete(asyncio.sleep(0))  # the loop runs the one hand-off
    loop.close()
    (batch,) = batches
    for logic_id in (0, 1):
        burst = batch.chips[logic_id].codes[SEPARATE]
        assert burst.events == 5000
        assert burst.last.event.assertion == RECOVER
        assert burst.turn is not None
        assert burst.turn.event.assertion == RAISE
    assert batch.strays.events == 1
    inbox.put(FaultEvent(0, SEPARATE, 2, RAISE))  # the loop is closed: kept, nothing raised
    assert inbox.received == 10_002


# -- what coalescing keeps -------------------------------------------------------------------

CODES = (SEPARATE, RESTART, LINK)
events_strategy = st.lists(st.tuples(st.sampled_from(CODES), st.sampled_from((RECOVER, RAISE, ONE_OFF))))
START_MS = 1_767_225_600_000  # the policies' clock, which stands still: every event within one instant
CONFIG = fault_config(base_config(None), None)


def _policy() -> FaultPolicy:
    return FaultPolicy(CONFIG, lambda: START_MS / 1000)


def _record(policy: FaultPolicy, arrival: Arrival) -> None:
    policy.observe(0, Observation.of_event(arrival.event, START_MS + round(arrival.at)))


def _codes(policy: FaultPolicy) -> set[int]:
    """The codes the policy holds on chip 0 now, chip and network codes."""
    judgement = policy.judge(0)
    sides = (judgement.chip, judgement.network)
    return {int(code, 16) for side in sides for code in side.codes[: side.current]}


def _apply_coalesced(policy: FaultPolicy, burst: ChipBurst) -> set[int]:
    """What the monitor does with a burst; returns the codes held between its turns and its last events."""
    for arrival in burst.turns():
        _record(policy, arrival)
    between = _codes(policy)
    for arrival in burst.lasts():
        _record(policy, arrival)
    return between


@given(before=events_strategy, events=events_strategy, cut=st.integers(min_value=0, max_value=40))
def test_a_coalesced_burst_leaves_the_codes_as_its_events_one_by_one(
    before: list[tuple[int, int]], events: list[tuple[int, int]], cut: int
) -> None:
    one_by_one, coalesced = _policy(), _policy()
    for at, (code, assertion) in enumerate(before):
        for policy in (one_by_one, coalesced):
            _record(policy, Arrival(FaultEvent(0, code, 2, assertion), float(at)))
    arrivals = [
        Arrival(FaultEvent(0, code, 2, assertion), float(len(before) + at))
        for at, (code, assertion) in enumerate(events)
    ]
    for arrival in arrivals:
        _record(one_by_one, arrival)
    # The thread's burst and the monitor's waiting burst are merged: cut the events in two.
    burst, later = ChipBurst(), ChipBurst()
    for index, arrival in enumerate(arrivals):
        (burst if index < cut else later).add(arrival)
    burst.merge(later)
    between = _apply_coalesced(coalesced, burst)

    assert _codes(coalesced) == _codes(one_by_one)  # the same codes on the chip
    assert coalesced.judge(0).level is one_by_one.judge(0).level
    assert burst.events == len(events)
    # A code raised and then recovered within the burst is held between the turns and the last
    # events (the chip's unhealthy moment is shown to damping), and one recovered and then raised is
    # not (its healthy moment is).
    for code in CODES:
        mine = [assertion for c, assertion in events if c == code]
        if mine and any((assertion == RECOVER) != (mine[-1] == RECOVER) for assertion in mine):
            assert (code in between) == (mine[-1] == RECOVER), f"{code:08X}: {mine}"


# -- convergence -----------------------------------------------------------------------------


async def test_after_a_storm_each_chip_is_what_its_last_events_say(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=MONITOR_LOG)
    flap = ((SEPARATE, RAISE), (SEPARATE, RECOVER))
    mixed = ((SEPARATE, RAISE), (RESTART, RAISE), (SEPARATE, RECOVER), (RESTART, RECOVER))
    # Slow enough (0.8 s) that the monitor applies them in several bursts: a flapper by any count.
    storms = {
        0: _storm(4000, *flap, rate=5000),  # ends recovered
        1: _storm(4001, *flap, rate=5000),  # ends raised
        2: _storm(4001, *mixed, rate=5000),  # ends on SEPARATE raised, RESTART recovered
    }
    with monitored(any_fake.open(_server()), policy=POLICY, event_log_interval=INTERVAL) as watched:
        await _subscribed(watched)
        flips: list[str] = []
        watched.inventory.on_transition(
            lambda old, new: flips.append(watched.inventory.table.chip_id(new.phy_id))
        )
        any_fake.update(_server(storms))
        await until(lambda: _accounted(caplog.records) == 12_002, "every event applied")

        recovered, raised, mixed_chip = (watched.device(f"Ascend910-{n}") for n in range(3))
        # Chip 0 flapped, so damping holds it although its code is gone: coalescing kept the spells.
        assert not recovered.healthy
        assert recovered.reason.startswith("flapping (")
        assert recovered.faults[0].level is FaultLevel.SeparateNPU  # what it flapped with, while held
        assert (raised.healthy, raised.reason) == (False, "fault 80818C00:SeparateNPU (event)")
        assert (mixed_chip.healthy, mixed_chip.reason) == (False, "fault 80818C00:SeparateNPU (event)")
        assert watched.device("Ascend910-3").healthy
        assert "Ascend910-3" not in flips

        watched.clock.advance(HOLD)  # clean for the whole hold: released
        await watched.monitor.poll_all()
        assert (watched.device("Ascend910-0").healthy, watched.device("Ascend910-0").faults) == (True, ())
        assert not watched.device("Ascend910-1").healthy  # polls never lift an event-only code
        assert watched.device("Ascend910-2").reason == "fault 80818C00:SeparateNPU (event)"
