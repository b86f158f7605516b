"""The chips' telemetry under npu-exporter's names, units and labels, so its dashboards and alerts work.

The text is written here, not by prometheus_client, and again only when a figure, a chip or a holder
changed, so a scrape of some 700 series costs a comparison. docs/telemetry.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ascend_plugin.holdings.held import ContainerChips
from ascend_plugin.holdings.pod_resources import ContainerRef
from ascend_plugin.telemetry.collector import ChipSample
from ascend_plugin.telemetry.readout import MAX_ERROR_CODES
from backends.library import PcieAddress

CARD_LABELS: Final = (
    "id",
    "model_name",
    "vdie_id",
    "pcie_bus_info",
    "namespace",
    "pod_name",
    "container_name",
)
MULTI_POD: Final = "not_displayed_for_multi_pod"
ECC_FIELDS: Final = (
    ("enable_flag", "ECC of the HBM enabled (1) or not (0)"),
    ("single_bit_error_cnt", "single-bit ECC errors of the HBM now"),
    ("double_bit_error_cnt", "double-bit ECC errors of the HBM now"),
    ("total_single_bit_error_cnt", "single-bit ECC errors of the HBM in its life"),
    ("total_double_bit_error_cnt", "double-bit ECC errors of the HBM in its life"),
    ("single_bit_isolated_pages_cnt", "HBM pages isolated for single-bit errors"),
    ("double_bit_isolated_pages_cnt", "HBM pages isolated for double-bit errors"),
)


@dataclass(frozen=True)
class TelemetryView:
    """One scrape's telemetry: every chip's sample and the containers holding chips of the node."""

    chips: Sequence[ChipSample]
    containers: Sequence[ContainerChips] = ()
    cards: int | None = None  # the node's DCMI cards, where the family shows them (machine_card_nums)

    def health_counts(self) -> tuple[int, int, int]:
        """npu-exporter's (healthy, unhealthy, unknown) chips, adding up to ``machine_npu_nums``: the health
        call answered 0, answered anything else, or failed (a dropped card, a chip not read yet)."""
        healthy = unhealthy = 0
        for sample in self.chips:
            health = sample.readout.health
            if health is None or health.status == -1 or health.dropped:
                continue
            healthy += health.status == 1
            unhealthy += health.status == 0
        return healthy, unhealthy, len(self.chips) - healthy - unhealthy

    def holders(self, phy_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding the chip (whole, a share of it, or a vNPU of it), sorted."""
        return tuple(sorted(held.ref for held in self.containers if phy_id in held.chips))

    def vnpu_holders(self, phy_id: int, vdev_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding vNPU ``vdev_id`` of the chip."""
        return tuple(
            sorted(
                held.ref
                for held in self.containers
                if any(device.vnpu == vdev_id and phy_id in device.chips for device in held.devices)
            )
        )


def pcie_bus_info(address: PcieAddress | None) -> str:
    """npu-exporter's spelling of a PCIe address: upper-case hex, ``0000:3B:00.0``; empty where unknown."""
    if address is None:
        return ""
    return f"{address.domain:04X}:{address.bus:02X}:{address.device:02X}.{address.function:X}"


def container_labels(holders: Sequence[ContainerRef]) -> tuple[str, str, str]:
    """(namespace, pod_name, container_name) of a chip's holder: empty for none, MULTI_POD for several."""
    if not holders:
        return ("", "", "")
    if len(holders) > 1:
        return (MULTI_POD, MULTI_POD, MULTI_POD)
    holder = holders[0]
    return (holder.namespace, holder.pod, holder.container)


@dataclass(frozen=True)
class _Chip:
    sample: ChipSample
    identity: tuple[str, str, str, str]  # id, model_name, vdie_id, pcie_bus_info
    holders: tuple[ContainerRef, ...]

    @property
    def labels(self) -> list[str]:
        return [*self.identity, *container_labels(self.holders)]


class _Families:
    """The gauge families of one rendering, by name, created on first use, written in that order."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, tuple[str, ...], list[str]]] = {}

    def add(
        self, name: str, help_text: str, labels: Sequence[str], values: Sequence[str], value: float
    ) -> None:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = (help_text, tuple(labels), [])
        pairs = ",".join(f'{label}="{_escaped(text)}"' for label, text in zip(family[1], values, strict=True))
        family[2].append(f"{name}{{{pairs}}} {_number(value)}" if pairs else f"{name} {_number(value)}")

    def text(self) -> str:
        lines = []
        for name, (help_text, _, samples) in self._families.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples]
        return "\n".join(lines) + "\n" if lines else ""


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """A sample value as prometheus_client writes it (``52.0``, ``0.87``)."""
    return repr(float(value))


def render(view: TelemetryView) -> str:
    families = _Families()
    families.add("machine_npu_nums", "the number of NPU chips of the node", (), (), len(view.chips))
    if view.cards is not None:
        families.add("machine_card_nums", "Amount of card installed on the machine.", (), (), view.cards)
    healthy, unhealthy, unknown = view.health_counts()
    families.add("machine_healthy_npu_nums", "Amount of healthy npu on the machine.", (), (), healthy)
    families.add("machine_unhealthy_npu_nums", "Amount of unhealthy npu on the machine.", (), (), unhealthy)
    families.add(
        "machine_unknown_npu_nums",
        "Amount of the npus whose health status cannot be obtained via DCMI interface on the machine.",
        (),
        (),
        unknown,
    )
    for sample in view.chips:
        chip = sample.state.chip
        info = chip.info
        identity = (
            str(chip.phy_id),
            f"{info.chip_name}-{info.chip_type}-{info.chip_ver}",
            sample.readout.vdie_id,
            pcie_bus_info(sample.state.pcie_address),
        )
        labelled = _Chip(sample, identity, view.holders(chip.phy_id))
        _chip_figures(families, labelled)
        _containers(families, labelled)
        _vnpus(families, labelled, view)
    return families.text()


class TelemetryText:
    """The telemetry's text, written again only when what it shows changed since the last scrape."""

    def __init__(self) -> None:
        self._shown: tuple[tuple[object, ...], tuple[object, ...]] | None = None
        self._text = b""

    def render(self, view: TelemetryView) -> bytes:
        shown = (
            tuple(item for sample in view.chips for item in (sample.state, sample.readout)),
            tuple(view.containers),
        )
        previous = self._shown
        if (
            previous is None
            or len(previous[0]) != len(shown[0])
            or any(old is not new for old, new in zip(previous[0], shown[0], strict=True))
            or previous[1] != shown[1]
        ):
            self._text = render(view).encode()
            self._shown = shown
        return self._text


def _chip_figures(families: _Families, chip: _Chip) -> None:
    readout, labels = chip.sample.readout, chip.labels

    def gauge(name: str, help_text: str, value: float | None) -> None:
        if value is not None:
            families.add(f"npu_chip_info_{name}", help_text, CARD_LABELS, labels, float(value))

    gauge("temperature", "the npu temperature, unit is 'C'", readout.temperature)
    gauge("power", "the npu power, unit is 'W'", readout.power)
    gauge("voltage", "the npu voltage, unit is 'V'", readout.voltage)
    gauge("aicore_current_freq", "the npu ai core current frequency, unit is 'MHz'", readout.aicore_frequency)
    usage = readout.utilization
    if usage is not None:
        gauge("utilization", "the ai core utilization, unit is '%'", usage.aicore)
        gauge("vector_utilization", "the vector core utilization, unit is '%'", usage.vector)
        gauge("cube_utilization", "the ai cube utilization, unit is '%'", usage.cube)
        gauge("overall_utilization", "the npu overall utilization, unit is '%'", usage.overall)
    health = readout.health
    if health is not None:
        gauge("health_status", "the npu health status: 1 healthy, 0 unhealthy, -1 unknown", health.status)
        if health.status != -1:  # the codes are known only when the health call answered
            codes = health.codes
            gauge("error_code", "the npu error code", codes[0] if codes else 0)
            for index, code in enumerate(codes[1:MAX_ERROR_CODES], start=1):  # error_code_1 .. _9
                gauge(f"error_code_{index}", "the npu error code", code)
    gauge("network_status", "the npu network health: 1 up, 0 down, -1 unknown", readout.network)
    if readout.ecc is not None:
        for field, help_text in ECC_FIELDS:
            gauge(f"hbm_ecc_{field}", help_text, getattr(readout.ecc, field))
    memory = readout.memory
    if memory is not None:
        prefix, kind = ("hbm_", "hbm") if memory.hbm else ("", "memory")
        gauge(f"{prefix}used_memory", f"the npu {kind} used, unit is 'MB'", memory.used_mb)
        gauge(f"{prefix}total_memory", f"the npu {kind} total, unit is 'MB'", memory.total_mb)
        gauge("hbm_utilization", "the npu hbm utilization, unit is '%'", memory.utilization)
        gauge("hbm_temperature", "the npu hbm temperature, unit is 'C'", memory.temperature_c)
        bandwidth = memory.bandwidth_utilization
        gauge("hbm_bandwidth_utilization", "the npu hbm bandwidth utilization, unit is '%'", bandwidth)


CONTAINER_LABELS: Final = (
    "id", "namespace", "pod_name", "container_name", "model_name", "vdie_id", "pcie_bus_info",
)  # fmt: skip
CONTAINER_INFO_LABELS: Final = (
    "npuID", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name",
    "containerID", "containerName",
)  # fmt: skip


def _containers(families: _Families, chip: _Chip) -> None:
    """npu_container_info for each container holding the chip; the container_npu_* for a sole holder."""
    phy, model, vdie, pcie = chip.identity
    for holder in chip.holders:
        names = (holder.namespace, holder.pod, holder.container)
        families.add(
            "npu_container_info",
            "the container name and deviceID relationship",
            CONTAINER_INFO_LABELS,
            [phy, model, vdie, pcie, *names, "", "_".join(names)],
            1.0,
        )
    if len(chip.holders) != 1:
        return
    labels = [phy, *container_labels(chip.holders), model, vdie, pcie]
    readout = chip.sample.readout

    def gauge(name: str, help_text: str, value: float) -> None:
        families.add(f"container_npu_{name}", help_text, CONTAINER_LABELS, labels, value)

    if readout.utilization is not None and readout.utilization.aicore is not None:
        gauge(
            "utilization", "the npu ai core utilization in container, unit is '%'", readout.utilization.aicore
        )
    if readout.memory is not None:
        gauge("total_memory", "the npu total memory in container, unit is 'MB'", readout.memory.total_mb)
        gauge("used_memory", "the npu used memory in container, unit is 'MB'", readout.memory.used_mb)


VNPU_LABELS: Final = (
    "id", "model_name", "v_dev_id", "aicore_count", "namespace", "pod_name", "container_name", "is_virtual",
)  # fmt: skip


def _vnpus(families: _Families, chip: _Chip, view: TelemetryView) -> None:
    """Each vNPU's AI-core use and memory (KB, as npu-exporter), with the container holding it."""
    phy, model, _, _ = chip.identity
    carved = {vnpu.vdev_id: vnpu for vnpu in chip.sample.state.vnpus or ()}
    for activity in chip.sample.readout.vnpus:
        vnpu = carved.get(activity.vdev_id)
        aicore = f"{vnpu.aicore:g}" if vnpu is not None else ""
        holder = container_labels(view.vnpu_holders(chip.sample.state.phy_id, activity.vdev_id))
        labels = [phy, model, str(activity.vdev_id), aicore, *holder, "true"]
        for name, help_text, value in (
            ("aicore_utilization", "the vnpu ai core utilization, unit is '%'", activity.aicore_utilization),
            ("total_memory", "the vnpu total memory, unit is 'KB'", activity.memory_total_kb),
            ("used_memory", "the vnpu used memory, unit is 'KB'", activity.memory_used_kb),
        ):
            families.add(f"vnpu_pod_{name}", help_text, VNPU_LABELS, labels, float(value))
