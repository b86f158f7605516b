"""FaultDuration: how long one code has been present on one chip, or clear since it timed out.

Huawei's clock, continuous instead of per report cycle: a code present for
more than ``FaultTimeout`` seconds *times out* (at raise time + FaultTimeout);
a timed-out code that then stays clear for more than ``RecoverTimeout``
seconds *recovers* (at clear time + RecoverTimeout); a code raised again
within RecoverTimeout stays timed out. A presence shorter than the timeout
leaves no trace. All times are Unix milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ascend_plugin.fault_policy.customization import DurationRule

MS = 1000


class DurationEdge(Enum):
    TIMED_OUT = "timed out"
    RECOVERED = "recovered"


@dataclass(frozen=True)
class DurationChange:
    """The clock crossed a threshold at ``at``."""

    edge: DurationEdge
    at: int


@dataclass
class DurationClock:
    """One code's presence on one chip, for its FaultDuration rule."""

    timed_out: bool = False
    present: bool = False
    since: int = 0  # when ``present`` last changed

    def raised(self, at: int, rule: DurationRule) -> list[DurationChange]:
        changes = self.advance(at, rule)
        if not self.present:
            self.present, self.since = True, max(at, self.since)
        return changes

    def cleared(self, at: int, rule: DurationRule) -> list[DurationChange]:
        changes = self.advance(at, rule)
        if self.present:
            self.present, self.since = False, max(at, self.since)
        return changes

    def advance(self, now: int, rule: DurationRule) -> list[DurationChange]:
        """The threshold crossed by ``now``, if any (at most one: the next needs a change of presence)."""
        deadline = self.deadline(rule)
        if deadline is None or now < deadline:
            return []
        self.timed_out = not self.timed_out
        edge = DurationEdge.TIMED_OUT if self.timed_out else DurationEdge.RECOVERED
        return [DurationChange(edge, deadline - 1)]

    def deadline(self, rule: DurationRule) -> int | None:
        """The first instant at which the next threshold counts as crossed (None: none is running)."""
        if self.present and not self.timed_out:
            return self.since + rule.fault_timeout * MS + 1  # Huawei: present for *more* than FaultTimeout
        if self.timed_out and not self.present:
            return self.since + rule.recover_timeout * MS + 1
        return None
