"""The health verdict on one chip: what the driver calls say, then what the fault policy says.

What decides, in order:

* a driver call on the chip hung: unhealthy, naming the call, until its lane is free;
* the health query failed ``failure_threshold`` times in a row: unhealthy, with
  the error; fewer failures keep judging from the last good reading;
* the chip was never read: unhealthy (a chip whose state is unknown is never offered);
* the chip dropped off the bus: unhealthy;
* the fault policy's judgement (:mod:`ascend_plugin.fault_policy`): unhealthy
  at a level Huawei's plugin reports unhealthy (PreSeparateNPU only while no pod
  holds the chip), naming each fault (and where it came from) and each escalation;
* a major or critical health value with no fault code at all to explain it: unhealthy;
* otherwise healthy (flap damping may still hold it: :mod:`.damping`).

The faults of the verdict are the chip's current codes at their levels
(:func:`~ascend_plugin.faults.current_faults`), whatever decided, and its
judgement the policy's, except where the chip was never read (or no poll
succeeded for ``failure_threshold`` tries): then there is no judgement to show.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_plugin.chip_calls import StuckCall
from ascend_plugin.fault_policy.chip import ChipJudgement
from ascend_plugin.fault_policy.levels import FaultLevel, kubelet_healthy
from ascend_plugin.faults import Fault, current_faults
from ascend_plugin.inventory.damping import Verdict
from backends.chips import HealthReading

_HEALTH_VALUES = {0: "ok", 1: "minor alarm", 2: "major alarm", 3: "critical alarm"}


@dataclass(frozen=True)
class Observation:
    """Everything the verdict on one chip rests on, at one moment."""

    reading: HealthReading | None  # the last good poll; None before the first
    judgement: ChipJudgement  # the fault policy's, now
    held: bool = False  # a pod holds the chip (as far as is known)
    failures: int = 0  # failed polls in a row since then
    error: str = ""  # the last failure, when ``failures`` > 0
    stuck: StuckCall | None = None


def judge(observation: Observation, failure_threshold: int) -> Verdict:
    """Healthy or not, and why (before damping)."""
    reading, judgement = observation.reading, observation.judgement
    faults = current_faults(judgement)
    if observation.stuck is not None:
        return Verdict(False, observation.stuck.overran, faults, judgement if reading is not None else None)
    if observation.failures >= failure_threshold:
        return Verdict(
            False, f"health query failed {observation.failures} times in a row: {observation.error}", ()
        )
    if reading is None:
        why = f": {observation.error}" if observation.error else ""
        return Verdict(False, f"health not read yet{why}", ())
    if reading.dropped:
        return Verdict(False, "card dropped off the bus (no health answer)", faults, judgement)
    if not judgement.healthy:
        why = _why(judgement, faults, set(reading.codes), observation.held)
        return Verdict(False, why, faults, judgement)
    if not faults and reading.value >= 2:
        state = _HEALTH_VALUES.get(reading.value, f"unknown value {reading.value}")
        return Verdict(
            False, f"health value {reading.value} ({state}) without a fault code", faults, judgement
        )
    return Verdict(True, "", faults, judgement)


def _why(judgement: ChipJudgement, faults: tuple[Fault, ...], polled: set[int], held: bool) -> str:
    """Why the policy judged the chip unhealthy: its bad faults (polled or event), its escalations.

    ``fault 80E01801:RestartBusiness (event); 80E18005 escalated to ManuallySeparateNPU (FaultFrequency)``.
    Network codes are left out: the network's health does not decide the chip's.
    """
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
