"""Escalations as Huawei records them in the device-info ConfigMap's ``UpgradeFaultReason`` key.

Each chip carries a set of reasons, one per (code, level, kind): FaultFrequency
and FaultDuration escalations, and FaultAutofill for a chip named in
``ManuallySeparateNPU`` whose reason was never recorded (its code is then the
word ``AutofillFaultCode``). The level of a chip is never below its reasons',
and a chip with a ManuallySeparateNPU reason is manually separated: named in
``ManuallySeparateNPU`` until the reason goes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ascend_plugin.fault_policy.codes import NETWORK_CODES, parse_code
from ascend_plugin.fault_policy.levels import FaultLevel

AUTOFILL_CODE = "AutofillFaultCode"


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
        """The code, or None for an autofilled reason."""
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


class ReasonBook:
    """One chip's reasons."""

    def __init__(self) -> None:
        self._reasons: dict[tuple[str, FaultLevel, UpgradeKind], UpgradeReason] = {}

    def all(self) -> tuple[UpgradeReason, ...]:
        """Every reason, oldest first."""
        return tuple(
            sorted(self._reasons.values(), key=lambda r: (r.upgrade_time, r.fault_code, r.level, r.kind))
        )

    def put(self, reason: UpgradeReason) -> None:
        """Record ``reason``, replacing one with the same code, level and kind."""
        self._reasons[reason.key] = reason

    def newest(self, reason: UpgradeReason) -> None:
        """Record ``reason`` unless one with the same key is newer (reading back a list of them)."""
        old = self._reasons.get(reason.key)
        if old is None or old.upgrade_time < reason.upgrade_time:
            self._reasons[reason.key] = reason

    def has(self, key: tuple[str, FaultLevel, UpgradeKind]) -> bool:
        return key in self._reasons

    def remove(self, matches: Callable[[UpgradeReason], bool]) -> tuple[UpgradeReason, ...]:
        """Remove and return the reasons ``matches`` picks."""
        gone = tuple(reason for reason in self.all() if matches(reason))
        for reason in gone:
            del self._reasons[reason.key]
        return gone

    @property
    def manual(self) -> bool:
        """Whether a reason separates the chip until an operator releases it."""
        return any(reason.level is FaultLevel.ManuallySeparateNPU for reason in self._reasons.values())
