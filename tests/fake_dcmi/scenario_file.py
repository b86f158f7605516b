"""The fake libdcmi.so's scenario file, written from a FakeScenario.

The C fake reads a plain line format, so that it needs no JSON parser and
stays short. Each line is a kind followed by ``key=value`` fields; values hold
no spaces, lists are comma-separated, a line starting with ``#`` is a comment::

    node api=1 driver_version=24.1.rc1 latency_ms=0 subscribe=0 errors=init:-8005 hang=health
    chip card=0 device=0 logic=0 phy=0 health=0 type=Ascend name=310P3 ver=V1 aicore_cnt=0
         aic=8.0 memory_mb=24576 severity=2 faults=80E01801,80C98006 events=7:80E01801:3:1
         pcie=0000:3b:00.0 ip=192.0.2.10 vdevs=100:vir02:2.0:6144:0:0:0,101:vir04:4.0:12288:1:0:1
         errors=health:-8012 hang=error_codes

One ``chip`` line per chip, on a single line; a field left out is empty or
zero. ``events`` are ``serial:code:severity:assertion``; ``vdevs`` are
``id:template:aicore:memory_mb:vfg_id:status:in_use``; a ``storm`` is
``serial:rate:count:`` then its steps ``code/severity/assertion`` joined by ``+``;
the telemetry, reset, super-pod and vNPU fields are listed in docs/dcmi.md. Everything the scenario
model resolves (card, device and logic ids, the AI-core figure per chip name,
whether subscription is supported, default PCIe addresses, event severities,
vNPU figures, every reading and which of them the chip's driver reports at
all, the reset group, the vNPU room and templates) is resolved here, by the
same FakeScenario methods the Python fake uses, so both fakes play the same
node. What the driver itself does (the MCU's logic id, -8255 for the IP of a
310B, the "not initialised" answer, -8001 for a type no DCMI enum has, the
reset window and boot status, the vNPU accounting and ids, the driver-state
file) is the C fake's own business. The scenario's ``missing`` functions are
no business of the file: a driver cannot drop a symbol at run time, so the C
player builds a variant of the library without them
(:class:`fake_dcmi.players.CFakePlayer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from backends.fake.driver import reset_group
from backends.fake.scenario import FakeChip, FakeScenario, Operation, PlacedChip
from backends.library import SPOD_NONE, EccDeviceType

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


def _words(values: Iterable[object]) -> str:
    return ":".join(str(value) for value in values)


def _frequencies(scenario: FakeScenario, chip: FakeChip) -> str:
    """Every clock the chip's driver reports (no HBM clock without HBM, no DDR clock without DDR)."""
    clocks = scenario.telemetry_of(chip).frequency_mhz
    return ",".join(f"{int(kind)}:{clocks.of(kind)}" for kind in sorted(scenario.frequency_types(chip)))


def _utilizations(scenario: FakeScenario, chip: FakeChip) -> str:
    """Every utilization input type the chip's driver answers (the Python fake's rules)."""
    figures = scenario.telemetry_of(chip).utilization_pct
    return ",".join(f"{int(kind)}:{figures.of(kind)}" for kind in sorted(scenario.utilization_types(chip)))


def _ecc(scenario: FakeScenario, chip: FakeChip) -> str:
    readings = scenario.telemetry_of(chip)
    own = "hbm" if scenario.has_hbm(chip) else "ddr"
    entries = [(kind, readings.ecc_of(kind, own)) for kind in EccDeviceType]
    return ",".join(
        f"{int(kind)}:{_words(vars(info).values())}" for kind, info in entries if info is not None
    )


def _dies(scenario: FakeScenario, chip: FakeChip) -> dict[str, str]:
    """The die ids the chip's driver answers, by field (ndie, vdie, ddie)."""
    return {
        kind.name.lower(): ":".join(f"{word:X}" for word in scenario.die_of(chip, kind).words)
        for kind in sorted(scenario.die_types(chip))
    }


def _spod(scenario: FakeScenario, chip: FakeChip) -> str:
    pod = scenario.super_pod_of(chip)
    if pod is None:
        return ""
    unsigned = [SPOD_NONE if value == -1 else value for value in (pod.super_pod_id, pod.server_id)]
    return _words([chip.phy_id, pod.scale_type, *unsigned, pod.chassis_id, pod.super_pod_type])


def _reset_mode(scenario: FakeScenario, placed: PlacedChip) -> int:
    """0: the chip resets alone; 1: its whole card (Atlas 300I Duo, device 0); 2: refused (device 1)."""
    group = reset_group(scenario, placed)
    return 2 if group is None else int(len(group) > 1)


def _room(scenario: FakeScenario, chip: FakeChip) -> dict[str, object]:
    room = scenario.room_of(chip)
    if room is None:
        return {}
    templates = ",".join(
        _words([name, repr(cost.aicore), cost.aicpu, cost.memory_mb, *cost.media])
        for name, cost in room.templates.items()
    )
    return {
        "room": _words(
            [repr(room.aicore), room.aicpu, room.memory_mb, room.max_vdevs, room.first_id, room.last_id]
        ),
        "media": _words(room.media),
        "templates": templates,
    }


def _telemetry(scenario: FakeScenario, placed: PlacedChip) -> dict[str, object]:
    chip = placed.chip
    readings = scenario.telemetry_of(chip)
    total = scenario.memory_mb_of(chip)
    used = min(readings.memory_used_mb, total)
    clocks, figures = readings.frequency_mhz, readings.utilization_pct
    multi = figures.multi()
    network = scenario.network_health_of(chip)
    return {
        "temp": readings.temperature_c,
        "power": round(readings.power_w * 10),
        "board_power": round(scenario.board_power_w(placed.card_id) * 10),
        "voltage": round(readings.voltage_v * 100),
        "freq": _frequencies(scenario, chip),
        "util": _utilizations(scenario, chip),
        "multi": "" if scenario.has_ddr(chip) else _words(vars(multi).values()),
        "hbm": _words([used, clocks.hbm, readings.hbm_temperature_c, readings.hbm_bandwidth_pct])
        if scenario.has_hbm(chip)
        else "",
        "ddr": _words([used, clocks.ddr, used * 100 // total if total else 0])
        if scenario.has_ddr(chip)
        else "",
        "ecc": _ecc(scenario, chip),
        "net": "" if network is None else network,
        **_dies(scenario, chip),
        "procs": ",".join(f"{process.pid}:{process.memory_bytes}" for process in chip.processes),
    }


def _driver_facts(scenario: FakeScenario, placed: PlacedChip) -> dict[str, object]:
    """Hot reset, super pod and vNPU facts of one chip."""
    chip = placed.chip
    usage = ",".join(
        _words([vdev_id, int(use.in_use), use.aicore_utilization, use.memory_used_mb])
        for vdev_id, use in chip.vdev_usage.items()
    )
    return {
        "reset_ms": round(scenario.reset_seconds_of(chip) * 1000),
        "clears": int(chip.reset_clears_faults),
        "reset_mode": _reset_mode(scenario, placed),
        "a3": int(scenario.is_a3(chip)),
        "brother": "" if chip.brother_card is None else chip.brother_card,
        "outband": "" if chip.outband_channel is None else chip.outband_channel,
        "spod": _spod(scenario, chip),
        **_room(scenario, chip),
        "usage": usage,
    }


def render(scenario: FakeScenario) -> str:
    """The scenario in the fake library's line format."""
    lines = [
        "# fake libdcmi.so scenario, written by tests/fake_dcmi/scenario_file.py from a FakeScenario",
        _line(
            "node",
            {
                "driver_version": scenario.driver_version,
                "latency_ms": scenario.latency_ms,
                "api": 2 if scenario.speaks_v2 else 1,
                "subscribe": int(scenario.subscription_supported()),
                "errors": _errors(scenario.errors),
                "hang": ",".join(scenario.hang),
                "vdev_dir": scenario.vdev_node_dir or "",
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
            "affinity": chip.cpu_affinity or "",
            **_telemetry(scenario, placed),
            **_driver_facts(scenario, placed),
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
