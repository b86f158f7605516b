"""The fake libdcmi.so's scenario file, written from a FakeScenario.

The C fake reads a plain line format, so that it needs no JSON parser and
stays short. Each line is a kind followed by ``key=value`` fields; values hold
no spaces, lists are comma-separated, a line starting with ``#`` is a comment::

    node driver_version=24.1.rc1 latency_ms=0 subscribe=0 errors=init:-8005 hang=health
    chip card=0 device=0 logic=0 phy=0 health=0 type=Ascend name=310B1 ver=V1 aicore_cnt=0
         aic=1.0 memory_mb=4096 severity=2 faults=80E01801,80C98006 errors=health:-8012 hang=error_codes

One ``chip`` line per chip, on a single line; a field left out is empty or
zero. Everything the scenario model resolves (card, device and logic ids, the
AI-core figure per chip name, whether subscription is supported) is resolved
here, by the same FakeScenario methods the Python fake uses, so both fakes
play the same node. What the driver itself decides (the MCU's logic id,
memory_info_v3 on 910B, the "not initialised" answer) is the C fake's own
business.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from backends.fake.scenario import FakeScenario, Operation

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
            "memory_mb": chip.memory_mb if chip.memory_mb is not None else scenario.memory_mb,
            "severity": chip.fault_severity,
            "faults": _codes(chip.fault_codes),
            "errors": _errors(chip.errors),
            "hang": ",".join(chip.hang),
        }
        aic = scenario.aicore_of(chip)
        if aic is not None:  # absent: the driver does not support the VDEV_MNG query
            fields["aic"] = repr(aic)
        lines.append(_line("chip", fields))
    return "\n".join(lines) + "\n"


def write_scenario(path: Path, scenario: FakeScenario) -> Path:
    """Replace ``path`` atomically with ``scenario``: the library never reads half a file."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(render(scenario), encoding="utf-8")
    temporary.replace(path)
    return path
