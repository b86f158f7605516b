"""A fault on a chip as the rest of the plugin reads it: a code and the level the fault policy gave it.

The health verdict keeps a chip's current faults as :class:`Fault` values
(:attr:`~ascend_plugin.inventory.inventory.ChipHealth.faults`) for the readers
that want codes and levels, not the policy's whole judgement: node labels,
Events, metrics, DRA taints, hot reset. :func:`current_faults` takes them from
a :class:`~ascend_plugin.fault_policy.chip.ChipJudgement`; the levels, the
rules and the configuration are :mod:`ascend_plugin.fault_policy`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_plugin.fault_policy.chip import ChipJudgement, FaultSide
from ascend_plugin.fault_policy.levels import FaultLevel

__all__ = ["Fault", "FaultLevel", "current_faults", "format_code"]


def format_code(code: int) -> str:
    """A fault code as the plugin logs it: at least eight upper-case hex digits."""
    return f"{code:08X}"


@dataclass(frozen=True)
class Fault:
    """One fault code on a chip and the level it was given."""

    code: int
    level: FaultLevel

    def __str__(self) -> str:
        return f"{format_code(self.code)}:{self.level.name}"


def current_faults(judgement: ChipJudgement) -> tuple[Fault, ...]:
    """The codes on the chip now, chip and network codes, each at its level; most severe first.

    A chip code's level is Huawei's for the chip with that code alone
    (escalations included), a network code's its network level. Codes that
    only an escalation still names are not current: the judgement's reasons
    carry them.
    """
    faults = {*_side_faults(judgement.chip), *_side_faults(judgement.network)}
    return tuple(sorted(faults, key=lambda fault: (-fault.level, fault.code)))


def _side_faults(side: FaultSide) -> list[Fault]:
    return [Fault(int(code, 16), side.times[code].level) for code in side.codes[: side.current]]
