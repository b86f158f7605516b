"""Fault events from the library's thread to the fault policy: coalesced per chip, paced, logged.

A burst keeps each code's last event and its *turn* (the latest earlier one the other way): the policy
ends as the events one by one would leave it. ARCHITECTURE.md "A fault's way", step 4.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ascend_plugin.chip_calls import hand_to_loop
from ascend_plugin.fault_policy.faults import Assertion, format_code
from backends.library import FaultEvent

log = logging.getLogger("ascend_plugin.inventory.monitor")  # the monitor's lines, where operators look

MAX_CODES = 256  # distinct codes a chip's burst holds


@dataclass(frozen=True)
class Arrival:
    """One event and when the library delivered it (the monitor's clock)."""

    event: FaultEvent
    at: float


def _raising(arrival: Arrival) -> bool:
    """Whether the event puts its code on the chip (raised or one-off) rather than lifting it."""
    return arrival.event.assertion != Assertion.RECOVERED


@dataclass
class CodeBurst:
    """The events of one code within a burst: the last, the latest turn before it, how many."""

    last: Arrival
    turn: Arrival | None = None  # the latest earlier event that went the other way
    events: int = 1

    def then(self, later: CodeBurst) -> None:
        """Fold in the events of the same code that came after these."""
        if later.turn is not None:
            self.turn = later.turn
        elif _raising(later.last) != _raising(self.last):
            self.turn = self.last
        self.last = later.last
        self.events += later.events


@dataclass
class ChipBurst:
    codes: dict[int, CodeBurst] = field(default_factory=dict)
    events: int = 0  # every event counted, the dropped ones included
    dropped: int = 0  # events whose code did not fit (MAX_CODES)

    def add(self, arrival: Arrival) -> None:
        self.events += 1
        self._fold(arrival.event.code, CodeBurst(arrival))

    def merge(self, later: ChipBurst) -> None:
        """Fold in a burst that came after this one."""
        self.events += later.events
        self.dropped += later.dropped
        for code, burst in later.codes.items():
            self._fold(code, burst)

    def turns(self) -> list[Arrival]:
        """The turn of every code that had one, in arrival order: the state the chip passed through."""
        return sorted((burst.turn for burst in self.codes.values() if burst.turn), key=lambda a: a.at)

    def lasts(self) -> list[Arrival]:
        """The last event of every code, in arrival order: the state the chip is in."""
        return sorted((burst.last for burst in self.codes.values()), key=lambda a: a.at)

    def _fold(self, code: int, burst: CodeBurst) -> None:
        held = self.codes.get(code)
        if held is not None:
            held.then(burst)
        elif len(self.codes) < MAX_CODES:
            self.codes[code] = burst
        else:
            self.dropped += burst.events


@dataclass
class Batch:
    """What the library's thread handed over at one wake-up of the loop."""

    chips: dict[int, ChipBurst] = field(default_factory=dict)  # by logic id
    strays: ChipBurst = field(default_factory=ChipBurst)  # events of logic ids the node does not have


class EventInbox:
    """Where the library's thread leaves fault events for the loop: per chip, bounded, one wake-up a
    batch; :meth:`put` never blocks on the loop and never raises."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[Batch], None],
        logic_ids: Collection[int],
        clock: Callable[[], float],
    ) -> None:
        self._loop = loop
        self._deliver = deliver
        self._logic_ids = frozenset(logic_ids)
        self._clock = clock
        self._lock = threading.Lock()
        self._batch = Batch()
        self._waking = False  # a wake-up of the loop is on its way
        self.received = 0  # events the library delivered
        self.wakeups = 0  # times the loop was woken for them

    def put(self, event: FaultEvent) -> None:
        """Fold ``event`` into its chip's burst (library thread); wake the loop unless it is already woken."""
        arrival = Arrival(event, self._clock())
        with self._lock:
            self.received += 1
            batch = self._batch
            if event.logic_id in self._logic_ids:
                batch.chips.setdefault(event.logic_id, ChipBurst()).add(arrival)
            else:
                batch.strays.add(arrival)
            if self._waking:
                return
            self._waking = True
            self.wakeups += 1
        hand_to_loop(self._loop, self._hand_over)  # a closed loop: the flag stays, nothing more is sent

    def _hand_over(self) -> None:
        with self._lock:
            batch, self._batch = self._batch, Batch()
            self._waking = False
        self._deliver(batch)


class PacedBursts:
    """Each chip's waiting events, ``burst`` at once, then ``rate`` a second (a token bucket per chip):
    only a chip whose events keep coming waits, its events folded in one burst."""

    def __init__(self, apply: Callable[[int, ChipBurst], None], rate: float, burst: int) -> None:
        self._apply = apply
        self._rate, self._burst = rate, burst
        self._waiting: dict[int, ChipBurst] = {}
        self._tokens: dict[int, tuple[float, float]] = {}  # chip -> tokens, and when counted (loop clock)
        self._due: set[int] = set()  # chips whose events wait for a token

    def add(self, chip: int, burst: ChipBurst) -> None:
        """Fold ``burst`` into the chip's waiting events; apply them now if a token is there."""
        self._waiting.setdefault(chip, ChipBurst()).merge(burst)
        if chip in self._due:
            return
        loop = asyncio.get_running_loop()
        tokens = self._count(chip, loop.time())
        if tokens >= 1:
            self._release(chip)
        else:
            self._due.add(chip)
            loop.call_later((1 - tokens) / self._rate, self._release, chip)

    def _count(self, chip: int, now: float) -> float:
        tokens, then = self._tokens.get(chip, (float(self._burst), now))
        tokens = min(self._burst, tokens + (now - then) * self._rate)
        self._tokens[chip] = tokens, now
        return tokens

    def _release(self, chip: int) -> None:
        self._due.discard(chip)
        now = asyncio.get_running_loop().time()
        self._tokens[chip] = max(self._count(chip, now) - 1, 0.0), now
        self._apply(chip, self._waiting.pop(chip))


# -- the log --------------------------------------------------------------------------------

ASSERTIONS = {0: "recovered", 1: "raised", 2: "one-off"}
NAMED_CODES = 8  # codes a line names; events of others are counted together


def describe(event: FaultEvent) -> str:
    """``severity 3, raised``."""
    return f"severity {event.severity}, {ASSERTIONS.get(event.assertion, f'assertion {event.assertion}')}"


@dataclass(frozen=True)
class Source:
    device: str  # the device ID; for events of logic ids the node does not have, says so
    chip: int | None = None  # physical id
    logic_id: int | None = None

    def extra(self) -> dict[str, object]:
        found = {"device": self.device, "chip": self.chip, "logic_id": self.logic_id}
        return {key: value for key, value in found.items() if value is not None}


@dataclass
class _Window:
    """A source's events since its last line (memory bounded: NAMED_CODES codes by name)."""

    timer: asyncio.TimerHandle
    events: int = 0
    dropped: int = 0
    codes: Counter[int] = field(default_factory=Counter)
    last: dict[int, FaultEvent] = field(default_factory=dict)
    others: int = 0  # events of codes beyond the named ones

    def count(self, burst: ChipBurst) -> None:
        self.events += burst.events
        self.dropped += burst.dropped
        for code, code_burst in burst.codes.items():
            if code in self.codes or len(self.codes) < NAMED_CODES:
                self.codes[code] += code_burst.events
                self.last[code] = code_burst.last.event
            else:
                self.others += code_burst.events


class FaultEventLog:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._windows: dict[Source, _Window] = {}

    def burst(self, source: Source, burst: ChipBurst) -> None:
        """A burst of ``source``'s events was applied: log it, or count it into the next summary."""
        window = self._windows.get(source)
        if window is not None:
            window.count(burst)
            return
        self._open(source)
        lasts = [arrival.event for arrival in burst.lasts()]
        codes = [format_code(event.code) for event in lasts]
        said = {"codes": codes, "events": burst.events, "suppressed": 0}
        if burst.events == 1 and len(lasts) == 1:
            _log(source, 0, said, "fault event %s on %s (%s)", codes[0], source.device, describe(lasts[0]))
            return
        shown = list(zip(codes, lasts, strict=True))[:NAMED_CODES]
        named = ", ".join(f"{code} {describe(event)}" for code, event in shown)
        if len(lasts) > NAMED_CODES:
            named += f", and {len(lasts) - NAMED_CODES} more codes"
        message = "%d fault events on %s; the last of each code: %s%s"
        _log(
            source, burst.dropped, said, message, burst.events, source.device, named, _dropped(burst.dropped)
        )

    def flush(self) -> None:
        """Write every pending summary now (the monitor stops)."""
        windows, self._windows = self._windows, {}
        for source, window in windows.items():
            window.timer.cancel()
            if window.events:
                self._write(source, window)

    def _open(self, source: Source) -> None:
        timer = asyncio.get_running_loop().call_later(self.interval, self._summarise, source)
        self._windows[source] = _Window(timer)

    def _summarise(self, source: Source) -> None:
        window = self._windows.pop(source, None)
        if window is not None and window.events:
            self._write(source, window)
            self._open(source)  # still busy: the next summary in another interval
        # else quiet for a whole interval: its next event is logged at once again

    def _write(self, source: Source, window: _Window) -> None:
        codes = [code for code, _ in window.codes.most_common()]
        named = ", ".join(
            f"{format_code(code)} x{window.codes[code]} (last {describe(window.last[code])})"
            for code in codes
        )
        if window.others:
            named += f", and {window.others} of other codes"
        said = {
            "codes": [format_code(code) for code in codes],
            "suppressed": window.events,
            "interval": self.interval,
        }
        message = "%d more fault events on %s within %g s, not logged one by one: %s%s"
        args = (window.events, source.device, self.interval, named, _dropped(window.dropped))
        _log(source, window.dropped, said, message, *args)


def _log(source: Source, dropped: int, said: dict[str, object], message: str, *args: object) -> None:
    """One fault-event line: a warning, with the count, where events were dropped."""
    extra = {**source.extra(), **said, **({"dropped": dropped} if dropped else {})}
    log.log(logging.WARNING if dropped else logging.INFO, message, *args, extra=extra)


def _dropped(dropped: int) -> str:
    if not dropped:
        return ""
    return f"; {dropped} events of codes beyond the {MAX_CODES} a chip holds at a time were dropped"
