"""The health verdict on one chip, from everything known about it.

What decides, in order:

* a driver call on the chip hung: unhealthy, naming the call, until its lane is free;
* the chip was never read: unhealthy (a chip whose state is unknown is never offered);
* the health query failed ``failure_threshold`` times in a row: unhealthy, with
  the error; fewer failures keep judging from the last good reading;
* the chip dropped off the bus: unhealthy;
* any fault whose level is worse than SubHealthFault, polled or held from an
  event: unhealthy, naming each fault and where it came from;
* a major or critical health value with no fault code to explain it: unhealthy;
* otherwise healthy (flap damping may still hold it: :mod:`.damping`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ascend_plugin.chip_calls import StuckCall
from ascend_plugin.faults import Fault, FaultTable
from ascend_plugin.inventory.damping import Verdict
from ascend_plugin.inventory.fault_memory import HeldFault
from backends.chips import HealthReading

_HEALTH_VALUES = {0: "ok", 1: "minor alarm", 2: "major alarm", 3: "critical alarm"}


@dataclass(frozen=True)
class Observation:
    """Everything the verdict on one chip rests on, at one moment."""

    reading: HealthReading | None  # the last good poll; None before the first
    failures: int = 0  # failed polls in a row since then
    error: str = ""  # the last failure, when ``failures`` > 0
    stuck: StuckCall | None = None
    held: Sequence[HeldFault] = ()


def judge(
    observation: Observation,
    table: FaultTable,
    severities: Mapping[int, int],
    failure_threshold: int,
    now: float,
) -> Verdict:
    """Healthy or not, and why (before damping)."""
    reading = observation.reading
    if observation.stuck is not None:
        faults = classify(reading, observation.held, table, severities)
        return Verdict(False, observation.stuck.overran, faults)
    if observation.failures >= failure_threshold:
        return Verdict(
            False, f"health query failed {observation.failures} times in a row: {observation.error}", ()
        )
    if reading is None:
        why = f": {observation.error}" if observation.error else ""
        return Verdict(False, f"health not read yet{why}", ())
    faults = classify(reading, observation.held, table, severities)
    if reading.dropped:
        return Verdict(False, "card dropped off the bus (no health answer)", faults)
    bad = [fault for fault in faults if not fault.level.healthy]
    if bad:
        polled = set(reading.codes)
        named = ", ".join(str(fault) if fault.code in polled else f"{fault} (event)" for fault in bad)
        return Verdict(False, f"fault {named}", faults)
    if not faults and reading.value >= 2:
        state = _HEALTH_VALUES.get(reading.value, f"unknown value {reading.value}")
        return Verdict(False, f"health value {reading.value} ({state}) without a fault code", faults)
    return Verdict(True, "", faults)


def classify(
    reading: HealthReading | None, held: Sequence[HeldFault], table: FaultTable, severities: Mapping[int, int]
) -> tuple[Fault, ...]:
    """Polled and held codes with their levels, most severe first.

    An unlisted code is judged by an event's severity where one is known, else
    by the chip's health value (0-3) standing in for it.
    """
    codes = set(reading.codes) if reading is not None else set()
    codes.update(fault.code for fault in held)
    hint = reading.value if reading is not None and reading.value in _HEALTH_VALUES else None
    return table.classify(codes, severities, hint)
