"""Fault codes learned from events, held until something says they are gone.

A fault event can arrive for a code that ``dcmi_get_device_errorcode_v2`` does
not (yet, or ever) list, so the verdict cannot rest on polled codes alone:

* a *raised* event (assertion 1) puts its code on the chip until a *recovery*
  event (assertion 0) for that code, or until the polls say it is gone: a poll
  listed the code, a later one (started after the event) no longer does, and
  the code's level allows recovery by poll (ManuallySeparateNPU does not). A
  code the polls never listed (the driver reports it by event only, or cannot
  list codes at all) is something the polls know nothing about: only its
  recovery event lifts it;
* a *one-off* event (assertion 2) holds its code for the level's hold time,
  then lets it go;
* a recovery event for a code not held changes nothing.

The event's severity is remembered per code: it classifies codes the fault
table does not know.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ascend_plugin.faults import FaultTable
from backends.chips import HealthReading
from backends.library import FaultEvent

RECOVERED, RAISED, ONE_OFF = 0, 1, 2


@dataclass(frozen=True)
class HeldFault:
    """A code an event put on a chip."""

    code: int
    severity: int
    since: float  # monotonic time the event arrived
    until: float | None = None  # one-off: when the hold ends
    polled: bool = False  # a poll has listed the code since


class FaultMemory:
    """The event-sourced codes of one chip."""

    def __init__(self) -> None:
        self._held: dict[int, HeldFault] = {}

    def held(self) -> tuple[HeldFault, ...]:
        """Every held code, in code order."""
        return tuple(self._held[code] for code in sorted(self._held))

    def record(self, event: FaultEvent, now: float, table: FaultTable) -> None:
        """Apply one event."""
        if event.assertion == RECOVERED:
            self._held.pop(event.code, None)
        elif event.assertion == ONE_OFF:
            hold = table.level_of(event.code, event.severity).one_off_hold
            self._held[event.code] = HeldFault(event.code, event.severity, now, now + hold)
        else:  # raised, and any assertion the driver adds later: take it seriously
            self._held[event.code] = HeldFault(event.code, event.severity, now)

    def reconcile(self, reading: HealthReading, poll_started: float, table: FaultTable) -> None:
        """Note the raised codes a poll lists; let go those the polls listed and no longer do."""
        if not reading.codes_known:
            return
        for code, held in list(self._held.items()):
            if held.until is not None:
                continue
            if code in reading.codes:
                if not held.polled:
                    self._held[code] = dataclasses.replace(held, polled=True)
            elif (
                held.polled
                and held.since < poll_started
                and table.level_of(code, held.severity).recovers_by_poll
            ):
                del self._held[code]

    def expire(self, now: float) -> None:
        """Let one-off codes go whose hold has ended."""
        for code, held in list(self._held.items()):
            if held.until is not None and held.until <= now:
                del self._held[code]

    def next_expiry(self) -> float | None:
        """When the next one-off hold ends, if any is running."""
        ends = [held.until for held in self._held.values() if held.until is not None]
        return min(ends) if ends else None
