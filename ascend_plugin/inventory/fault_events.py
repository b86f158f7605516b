"""Fault events on their way from the library's thread to the verdict: coalesced per chip, memory bounded.

A driver can deliver fault events far faster than anything needs them: a link
that flaps raises and recovers a code thousands of times a second. Handing each
event to the event loop on its own (a callback per event) queues callbacks as
fast as the driver sends them, and judges states nobody will ever see. Instead
the library's thread folds each event into its chip's :class:`ChipBurst`, under
a lock and in constant time, and wakes the loop once for everything that piled
up meanwhile (:class:`EventInbox`). The monitor folds bursts that arrive faster
than its :class:`Pace` allows into the one it will apply next.

What coalescing keeps. Which codes the fault policy holds on a chip
(:mod:`ascend_plugin.fault_policy`) depends, code by code, on the last event of
the code alone, so the last one of a burst leaves them as the whole sequence
would have. (A FaultFrequency count sees each turn and last event of a burst,
not every repeat within it: a code flapping a thousand times a second counts
as often as the monitor applies its bursts.) What happened in between matters
too: a code raised and recovered within one burst made the chip unhealthy for
a moment, and flap damping counts such moments. So for each code a burst also
keeps the latest earlier event that went the other way (a raise before a
final recovery, a recovery before a final raise), its *turn*. Applying the
turns, judging, then applying the last events and judging again shows damping
a spell wherever the chip flapped within the burst, and ends in exactly the
state the events one by one would have left.

What it drops, and says so: a burst holds at most :data:`MAX_CODES` distinct
codes per chip (DCMI lists at most 128 at a time); events of further codes are
counted as dropped and logged, since keeping them would make memory grow with
whatever the driver sends. Events for a logic id the node does not have are
counted, not kept.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ascend_plugin.chip_calls import hand_to_loop
from ascend_plugin.fault_policy.observations import Assertion
from backends.library import FaultEvent

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
    """A chip's events since they were last applied, by code."""

    codes: dict[int, CodeBurst] = field(default_factory=dict)
    events: int = 0  # every event counted, the dropped ones included
    dropped: int = 0  # events whose code did not fit (MAX_CODES)

    def add(self, arrival: Arrival) -> None:
        """Fold in one event."""
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
    """Where the library's thread leaves fault events for the loop: per chip, bounded, one wake-up a batch.

    :meth:`put` is the subscription's handler. It never blocks on the loop and
    never raises: once the loop has closed, events fold into the bounded batch
    that nobody takes.
    """

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


class Pace:
    """How often a chip's events are applied: ``burst`` at once, then ``rate`` a second (a token bucket).

    An event after a quiet spell is applied the moment it arrives; only a chip
    whose events keep coming waits, and its events wait folded in one burst.
    """

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp: float | None = None

    def delay(self, now: float) -> float:
        """Seconds until the next application may happen (0: now)."""
        self._refill(now)
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate

    def spend(self, now: float) -> None:
        """One application happens now."""
        self._refill(now)
        self._tokens = max(self._tokens - 1, 0.0)

    def _refill(self, now: float) -> None:
        if self._stamp is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
