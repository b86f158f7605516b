"""The fake libdcmi.so's scenario file, written from a FakeScenario.

The C fake reads a plain line format, so that it needs no JSON parser and
stays short. Each line is a kind followed by ``key=value`` fields; values hold
no spaces, lists are comma-separated, a line starting with ``#`` is a comment::

    node driver_version=24.1.rc1 latency_ms=0 subscribe=0 errors=init:-8005 hang=health
    chip card=0 device=0 logic=0 phy=0 health=0 type=Ascend name=310P3 ver=V1 aicore_cnt=0
         aic=8.0 memory_mb=24576 severity=2 faults=80E01801,80C98006 events=7:80E01801:3:1
         pcie=0000:3b:00.0 ip=192.0.2.10 vdevs=100:vir02:2.0:6144:0:0:0,101:vir04:4.0:12288:1:0:1
         errors=health:-8012 hang=error_codes

One ``chip`` line per chip, on a single line; a field left out is empty or
zero. ``events`` are ``serial:code:severity:assertion``; ``vdevs`` are
``id:template:aicore:memory_mb:vfg_id:status:in_use``; a ``storm`` is
``serial:rate:count:`` then its steps ``code/severity/assertion`` joined by ``+``. Everything the scenario
model resolves (card, device and logic ids, the AI-core figure per chip name,
whether subscription is supported, default PCIe addresses, event severities,
vNPU figures) is resolved here, by the same FakeScenario methods the Python
fake uses, so both fakes play the same node. What the driver itself decides
(the MCU's logic id, memory_info_v3 on 910B, -8255 for the IP of a 310B,
the "not initialised" answer) is the C fake's own business. The scenario's
``missing`` functions are no business of the file: a driver cannot drop a
symbol at run time, so the C player builds a variant of the library without
them (:class:`fake_dcmi.players.CFakePlayer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from backends.fake.scenario import FakeChip, FakeScenario, Operation

SCENARIO_ENV: Final = "FAKE_DCMI_SCENARIO"


class UnwritableScenario(ValueError):
    """A value the line format cannot carry (it contains white space or '#')."""


def _value(key: str, value: object) -> str:
    text = str(value)
    if any(character.isspace() or character == "#" for character in text):
        raise UnwritableScenario(f"{key}={text!r}: the scenario line format takes no spaces or '#'")
    return text


def _line(kind: str, fields: Mapping[str, object]) -> str:
    """``kind key=value ...``; empty values are left out (the library's default is empty or zero)."""
    texts = {key: _value(key, value) for key, value in fields.items()}
    return " ".join([kind, *(f"{key}={text}" for key, text in texts.items() if text)])


def _errors(errors: Mapping[Operation, int]) -> str:
    return ",".join(f"{operation}:{code}" for operation, code in errors.items())


def _codes(codes: Iterable[int]) -> str:
    return ",".join(f"{code:08X}" for code in codes)


def _events(chip: FakeChip) -> str:
    return ",".join(
        f"{event.serial}:{event.code:08X}:{chip.event_severity(event)}:{event.assertion}"
        for event in chip.events
    )


def _storm(chip: FakeChip) -> str:
    storm = chip.storm
    if storm is None:
        return ""
    steps = "+".join(f"{step.code:08X}/{chip.event_severity(step)}/{step.assertion}" for step in storm.steps)
    return f"{storm.serial}:{storm.rate!r}:{storm.count}:{steps}"


def _vdevs(scenario: FakeScenario, chip: FakeChip) -> str:
    return ",".join(
        f"{vdev.vdev_id}:{vdev.template}:{vdev.aicore!r}:{vdev.memory_mb}:{vdev.vfg_id}:{vdev.status}:{int(vdev.in_use)}"
        for vdev in scenario.vdevs_of(chip)
    )


def render(scenario: FakeScenario) -> str:
    """The scenario in the fake library's line format."""
    lines = [
        "# fake libdcmi.so scenario, written by tests/fake_dcmi/scenario_file.py from a FakeScenario",
        _line(
            "node",
            {
                "driver_version": scenario.driver_version,
                "latency_ms": scenario.latency_ms,
                "subscribe": int(scenario.subscription_supported()),
                "errors": _errors(scenario.errors),
                "hang": ",".join(scenario.hang),
            },
        ),
    ]
    for placed in scenario.placed:
        chip = placed.chip
        fields: dict[str, object] = {
            "card": placed.card_id,
            "device": placed.device_id,
            "logic": placed.logic_id,
            "phy": chip.phy_id,
            "health": chip.health,
            "type": scenario.chip_type,
            "name": scenario.chip_name_of(chip),
            "ver": scenario.chip_ver,
            "npu": scenario.npu_name,
            "aicore_cnt": scenario.aicore_cnt,
            "memory_mb": scenario.memory_mb_of(chip),
            "severity": chip.fault_severity,
            "faults": _codes(chip.fault_codes),
            "events": _events(chip),
            "storm": _storm(chip),
            "vdevs": _vdevs(scenario, chip),
            "ip": chip.device_ip or "",
            "errors": _errors(chip.errors),
            "hang": ",".join(chip.hang),
        }
        aic = scenario.aicore_of(chip)
        if aic is not None:  # absent: the driver does not support the VDEV_MNG query
            fields["aic"] = repr(aic)
        pcie = scenario.pcie_of(chip)
        if pcie is not None:  # absent: not a PCIe device (SoC boards)
            fields["pcie"] = pcie.bdf
        lines.append(_line("chip", fields))
    return "\n".join(lines) + "\n"


def write_scenario(path: Path, scenario: FakeScenario) -> Path:
    """Replace ``path`` atomically with ``scenario``: the library never reads half a file."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(render(scenario), encoding="utf-8")
    temporary.replace(path)
    return path
