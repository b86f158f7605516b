"""The health verdict on one chip: what the driver calls say, then the fault policy's judgement.

The order in which they decide: docs/faults.md "How a chip's level is decided".
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_plugin.chip_calls import StuckCall
from ascend_plugin.fault_policy.chip import ChipJudgement
from ascend_plugin.fault_policy.faults import Fault, FaultLevel, format_code, kubelet_healthy
from backends.chips import HealthReading

_HEALTH_VALUES = {0: "ok", 1: "minor alarm", 2: "major alarm", 3: "critical alarm"}


@dataclass(frozen=True)
class Verdict:
    """Healthy or not, and why: the monitor's verdict on one chip, as the inventory keeps it."""

    known: bool = False  # False until the first verdict
    healthy: bool = False
    reason: str = "not looked at yet"  # why it is unhealthy; empty when healthy
    faults: tuple[Fault, ...] = ()  # current faults, most severe first
    # What the fault policy said of the chip (None: not judged, e.g. never read): the device-info
    # ConfigMap writes its levels, codes and times.
    judgement: ChipJudgement | None = None

    @property
    def worst_level(self) -> FaultLevel:
        """The chip's level: the policy's (escalations included), else its worst fault's, or NormalNPU;
        the network's is apart."""
        if self.judgement is not None:
            return self.judgement.level
        return self.faults[0].level if self.faults else FaultLevel.NormalNPU

    @property
    def codes(self) -> list[str]:
        return [format_code(fault.code) for fault in self.faults]


@dataclass(frozen=True)
class Polls:
    """What the chip's polls said: the last good reading, and the failures since."""

    reading: HealthReading | None = None  # None before the first good poll
    at: int = 0  # when the poll that read it began, on the fault policy's clock (Unix ms)
    failures: int = 0  # failed polls in a row since
    error: str = ""  # the last failure's, when ``failures`` > 0


def judge(
    polls: Polls, judgement: ChipJudgement, *, held: bool, stuck: StuckCall | None, failure_threshold: int
) -> Verdict:
    """Healthy or not, and why (before damping); ``held``: a pod holds the chip. No judgement shows
    where no poll has read the chip lately."""
    reading = polls.reading
    faults = judgement.faults
    if stuck is not None:
        return Verdict(True, False, stuck.overran, faults, judgement if reading is not None else None)
    if polls.failures >= failure_threshold:
        return Verdict(True, False, f"health query failed {polls.failures} times in a row: {polls.error}")
    if reading is None:
        return Verdict(True, False, f"health not read yet{f': {polls.error}' if polls.error else ''}")
    if reading.dropped:
        return Verdict(True, False, "card dropped off the bus (no health answer)", faults, judgement)
    if not judgement.healthy:
        return Verdict(True, False, _why(judgement, faults, set(reading.codes), held), faults, judgement)
    if not faults and reading.value >= 2:
        state = _HEALTH_VALUES.get(reading.value, f"unknown value {reading.value}")
        why = f"health value {reading.value} ({state}) without a fault code"
        return Verdict(True, False, why, faults, judgement)
    return Verdict(True, True, "", faults, judgement)


def _why(judgement: ChipJudgement, faults: tuple[Fault, ...], polled: set[int], held: bool) -> str:
    """Why the policy judged the chip unhealthy: its bad faults and escalations (network codes aside),
    ``fault 80E01801:RestartBusiness (event); 80E18005 escalated to ManuallySeparateNPU (FaultFrequency)``."""
    network = {int(code, 16) for code in judgement.network.codes}
    bad = [
        fault for fault in faults if fault.code not in network and not kubelet_healthy(fault.level, held=held)
    ]
    parts = []
    if bad:
        named = ", ".join(str(fault) if fault.code in polled else f"{fault} (event)" for fault in bad)
        parts.append(f"fault {named}")
    parts.extend(
        f"{reason.fault_code.upper()} escalated to {reason.level.name} ({reason.kind.value})"
        for reason in judgement.reasons
        if not reason.network
    )
    if judgement.level is FaultLevel.PreSeparateNPU:
        parts.append("no pod holds the chip (PreSeparateNPU is healthy only while one does)")
    return "; ".join(parts) or f"fault level {judgement.level.name}"
