"""What raises a chip above its codes' level, and what lifts it: FaultFrequency, FaultDuration.

Their escalations are recorded as :class:`UpgradeReason`, the shape of the device-info ConfigMap's
``UpgradeFaultReason`` (docs/faults.md "FaultFrequency", "FaultDuration"). Times: Unix ms.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from ascend_plugin.fault_policy.customization import DurationRule, FrequencyRule
from ascend_plugin.fault_policy.faults import NETWORK_CODES, FaultLevel, parse_code

MS = 1000
AUTOFILL_CODE = "AutofillFaultCode"  # the code of a separation read back without its reason


class UpgradeKind(StrEnum):
    """What escalated a chip (Huawei's ``upgrade_type``)."""

    FREQUENCY = "FaultFrequency"
    DURATION = "FaultDuration"
    AUTOFILL = "FaultAutofill"


class ReleaseCause(StrEnum):
    """Why an escalation was lifted."""

    OPERATOR = "removed from ManuallySeparateNPU"
    RELEASE_WINDOW = "clear for its ReleaseTimeWindow"
    RECOVERED = "clear for its RecoverTimeout"
    CONFIGURATION = "no longer in the fault configuration"
    AUTOFILL_WINDOW = "the release window of a separation read back without its reason passed"


@dataclass(frozen=True)
class UpgradeReason:
    """One escalation of one chip, in Huawei's ``UpgradeFaultReason`` shape."""

    fault_code: str  # lower-case hex as the configuration spells it, or AUTOFILL_CODE
    level: FaultLevel
    kind: UpgradeKind
    upgrade_time: int  # Unix milliseconds

    @property
    def key(self) -> tuple[str, FaultLevel, UpgradeKind]:
        return self.fault_code, self.level, self.kind

    @property
    def code(self) -> int | None:
        return parse_code(self.fault_code)

    @property
    def network(self) -> bool:
        """Whether it escalates the chip's network (a network code) rather than the chip."""
        return self.code in NETWORK_CODES


@dataclass(frozen=True)
class Release:
    """Escalations lifted from one chip, and why (a node Event tells the cluster)."""

    phy_id: int
    reasons: tuple[UpgradeReason, ...]
    cause: ReleaseCause


class Reasons:
    def __init__(self) -> None:
        self._reasons: dict[tuple[str, FaultLevel, UpgradeKind], UpgradeReason] = {}

    def all(self) -> tuple[UpgradeReason, ...]:
        return tuple(
            sorted(self._reasons.values(), key=lambda r: (r.upgrade_time, r.fault_code, r.level, r.kind))
        )

    def put(self, reason: UpgradeReason) -> None:
        self._reasons[reason.key] = reason

    def newest(self, reason: UpgradeReason) -> None:
        """Record ``reason`` unless one with the same key is newer (reading back a list of them)."""
        old = self._reasons.get(reason.key)
        if old is None or old.upgrade_time < reason.upgrade_time:
            self._reasons[reason.key] = reason

    def has(self, key: tuple[str, FaultLevel, UpgradeKind]) -> bool:
        return key in self._reasons

    def remove(self, matches: Callable[[UpgradeReason], bool]) -> tuple[UpgradeReason, ...]:
        gone = tuple(reason for reason in self.all() if matches(reason))
        for reason in gone:
            del self._reasons[reason.key]
        return gone

    @property
    def manual(self) -> bool:
        """Whether a reason separates the chip until an operator releases it."""
        return any(reason.level is FaultLevel.ManuallySeparateNPU for reason in self._reasons.values())


# -- FaultFrequency ----------------------------------------------------------------------------


@dataclass
class FrequencyCounter:
    occurrences: list[int] = field(default_factory=list)  # oldest first
    last_fault: int | None = None
    last_recover: int | None = None

    def occurred(self, at: int) -> None:
        bisect.insort(self.occurrences, at)
        self.last_fault = at if self.last_fault is None else max(self.last_fault, at)

    def recovered(self, at: int) -> None:
        self.last_recover = at if self.last_recover is None else max(self.last_recover, at)

    def restored(self, escalated_at: int, now: int) -> None:
        """An escalation at ``escalated_at`` was read back at ``now``: count the code clear since then."""
        self.last_fault = escalated_at if self.last_fault is None else max(self.last_fault, escalated_at)
        self.recovered(now)

    def reached(self, rule: FrequencyRule, now: int) -> bool:
        """Whether the code occurred ``times`` times within the window ending ``now``."""
        start = now - rule.time_window * MS
        del self.occurrences[: bisect.bisect_left(self.occurrences, start)]
        return len(self.occurrences) >= rule.times

    def restart_count(self) -> None:
        """Forget the occurrences: the escalation they caused stands for them."""
        self.occurrences.clear()

    def release_at(self, rule: FrequencyRule) -> int | None:
        """When an escalation by ``rule`` is lifted, as things stand (None: not while they do)."""
        if not rule.releases or self.last_recover is None:
            return None
        if self.last_fault is not None and self.last_recover < self.last_fault:
            return None  # not recovered since it last occurred
        return self.last_recover + rule.release_window * MS + 1  # Huawei: clear for *more* than the window


# -- FaultDuration -----------------------------------------------------------------------------


class DurationEdge(Enum):
    TIMED_OUT = "timed out"
    RECOVERED = "recovered"


@dataclass(frozen=True)
class DurationChange:
    edge: DurationEdge
    at: int  # when the clock crossed the threshold


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
