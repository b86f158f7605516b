"""Fault-event log lines: a chip's first burst at once, then one summary per chip per interval.

An event after a quiet spell is logged the moment it is applied, one line for
the burst it came in. While that chip's events keep coming, none is logged one
by one: once per ``interval`` a single line says how many there were, of which
codes, and how each code's last event went, with the count in the structured
``suppressed`` field. A storm of any size therefore costs a chip one line per
interval, and every event is accounted for: the ``events`` of a first line and
the ``suppressed`` of the summaries after it add up to what the driver sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field

from ascend_plugin.faults import format_code
from ascend_plugin.inventory.fault_events import MAX_CODES, ChipBurst
from backends.library import FaultEvent

log = logging.getLogger("ascend_plugin.inventory.monitor")  # the monitor's lines, where operators look

ASSERTIONS = {0: "recovered", 1: "raised", 2: "one-off"}
NAMED_CODES = 8  # codes a line names; events of others are counted together


def describe(event: FaultEvent) -> str:
    """``severity 3, raised``."""
    return f"severity {event.severity}, {ASSERTIONS.get(event.assertion, f'assertion {event.assertion}')}"


@dataclass(frozen=True)
class Source:
    """Whose events these are, as the log names them."""

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
    """Rate-limited fault-event lines, per source (runs on the loop)."""

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
        extra = {**source.extra(), "codes": [format_code(event.code) for event in lasts]}
        extra.update(events=burst.events, suppressed=0)
        level = logging.WARNING if burst.dropped else logging.INFO
        if burst.events == 1 and len(lasts) == 1:
            code, event = format_code(lasts[0].code), lasts[0]
            log.log(level, "fault event %s on %s (%s)", code, source.device, describe(event), extra=extra)
            return
        named = ", ".join(f"{format_code(event.code)} {describe(event)}" for event in lasts[:NAMED_CODES])
        if len(lasts) > NAMED_CODES:
            named += f", and {len(lasts) - NAMED_CODES} more codes"
        log.log(
            level,
            "%d fault events on %s; the last of each code: %s%s",
            burst.events,
            source.device,
            named,
            _dropped(burst.dropped),
            extra={**extra, "dropped": burst.dropped} if burst.dropped else extra,
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
        extra = {**source.extra(), "codes": [format_code(code) for code in codes]}
        extra.update(suppressed=window.events, interval=self.interval)
        log.log(
            logging.WARNING if window.dropped else logging.INFO,
            "%d more fault events on %s within %g s, not logged one by one: %s%s",
            window.events,
            source.device,
            self.interval,
            named,
            _dropped(window.dropped),
            extra={**extra, "dropped": window.dropped} if window.dropped else extra,
        )


def _dropped(dropped: int) -> str:
    if not dropped:
        return ""
    return f"; {dropped} events of codes beyond the {MAX_CODES} a chip holds at a time were dropped"
