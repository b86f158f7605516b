"""ChipBackend: one chip family's rules on top of a device library.

A backend answers the questions the plugin asks about chips: which chips the
node has, what the kubelet should call them, whether each is healthy, which
device nodes and environment a container needs, how many AI cores a chip has
and whether that figure is plausible. The family-specific answers come from a
:class:`FamilyTable` (data, overridable from settings); the few behaviours
that differ by family are methods a family subclass overrides.
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from backends.errors import NOT_READY, NOT_SUPPORTED, DcmiError
from backends.library import HEALTH_ABSENT, ChipInfo, DeviceLibrary, MemoryInfo

# Synthetic fault code Huawei's plugin records when a card drops off the bus
# (dcmi_get_device_health answering -8012); it classifies as RestartNPU.
CARD_DROPPED_CODE = 0x40F84E00


@dataclass(frozen=True)
class Chip:
    """One NPU chip as DCMI addresses it."""

    card_id: int
    device_id: int
    logic_id: int
    phy_id: int
    info: ChipInfo

    @property
    def label(self) -> str:
        """How logs name this chip: physical id plus its DCMI address."""
        return f"chip {self.phy_id} (card {self.card_id}, device {self.device_id}, {self.info.chip_name})"


@dataclass(frozen=True)
class HealthReading:
    """What one health poll of a chip returned."""

    value: int  # dcmi_get_device_health; HEALTH_ABSENT when the card dropped
    codes: tuple[int, ...]  # current fault codes

    @property
    def dropped(self) -> bool:
        """The chip is gone from the bus."""
        return self.value == HEALTH_ABSENT


@dataclass(frozen=True)
class AiCoreFigure:
    """An AI-core count and where it came from."""

    value: float
    source: Literal["vdev_total_resource", "chip_info", "family_nominal"]


@dataclass(frozen=True)
class DeviceNode:
    """A device node to hand to a container."""

    host_path: str
    container_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class HostMount:
    """A host path to mount into a container."""

    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class FamilyTable:
    """Everything that differs between chip families, as data.

    Each field can be overridden from settings (and so from the Helm values of a
    family) with :meth:`with_overrides`.
    """

    family: str
    resource_name: str
    device_id_prefix: str
    accelerator_label: str
    ai_core_min: float
    ai_core_max: float
    ai_core_nominal: float
    # Candidates for the manager node, best first; the first that exists on the
    # host is mapped to /dev/davinci_manager in the container.
    manager_nodes: tuple[str, ...] = ("/dev/davinci_manager",)
    # Shared nodes added (same path inside) when they exist on the host.
    shared_nodes: tuple[str, ...] = ("/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist")
    # Host paths mounted read-only in device mode when they exist.
    driver_mounts: tuple[str, ...] = ("/usr/local/Ascend/driver",)
    # Extra environment in Ascend-Docker-Runtime mode.
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    memory_query: Literal["hbm", "memory_info"] = "memory_info"
    fault_subscription: bool = False

    def with_overrides(self, **overrides: object) -> FamilyTable:
        """A copy with every non-None override applied."""
        chosen = {key: value for key, value in overrides.items() if value is not None}
        return dataclasses.replace(self, **chosen)  # type: ignore[arg-type]


class ChipBackend(ABC):
    """The rules of one chip family, applied to a device library."""

    TABLE: ClassVar[FamilyTable]
    # Chip names (``dcmi_chip_info.chip_name``) this family claims.
    CHIP_NAME: ClassVar[re.Pattern[str]]

    def __init__(self, library: DeviceLibrary, table: FamilyTable | None = None) -> None:
        self.library = library
        self.table = table or self.TABLE

    @classmethod
    def claims(cls, info: ChipInfo) -> bool:
        """True when a chip with this info belongs to the family."""
        return bool(cls.CHIP_NAME.search(info.chip_name))

    # -- enumeration ---------------------------------------------------------

    def discover(self) -> list[Chip]:
        """Every NPU chip of the node, ordered by physical id."""
        return sorted(enumerate_chips(self.library), key=lambda chip: chip.phy_id)

    def device_id(self, chip: Chip) -> str:
        """The kubelet's name for a chip, e.g. ``Ascend310-0``."""
        return f"{self.table.device_id_prefix}-{chip.phy_id}"

    # -- health ----------------------------------------------------------------

    def read_health(self, chip: Chip) -> HealthReading:
        """Poll one chip: health value plus current fault codes.

        A health call answering "not ready" (-8012) means the card dropped off
        the bus; it is reported as absent with the synthetic card-drop code.
        """
        try:
            value = self.library.health(chip.card_id, chip.device_id)
        except DcmiError as error:
            if error.code == NOT_READY:
                return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
            raise
        if value == HEALTH_ABSENT:
            return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
        codes = tuple(self.library.error_codes(chip.card_id, chip.device_id))
        return HealthReading(value, codes)

    # -- figures ---------------------------------------------------------------

    def ai_cores(self, chip: Chip) -> AiCoreFigure:
        """The chip's AI-core count: VDEV_MNG total resource, else chip info, else nominal."""
        try:
            aic = self.library.total_aicore(chip.card_id, chip.device_id)
        except DcmiError:
            aic = 0.0
        if aic > 0:
            return AiCoreFigure(aic, "vdev_total_resource")
        if chip.info.aicore_cnt > 0:
            return AiCoreFigure(float(chip.info.aicore_cnt), "chip_info")
        return AiCoreFigure(self.table.ai_core_nominal, "family_nominal")

    def ai_cores_in_bounds(self, figure: AiCoreFigure) -> bool:
        """True when the figure lies within the family's bounds."""
        return self.table.ai_core_min <= figure.value <= self.table.ai_core_max

    def memory(self, chip: Chip) -> MemoryInfo | None:
        """Device memory, from the query the family supports; None if unsupported."""
        query = self.library.hbm_info if self.table.memory_query == "hbm" else self.library.memory_info
        try:
            return query(chip.card_id, chip.device_id)
        except DcmiError as error:
            if error.code == NOT_SUPPORTED:
                return None
            raise

    # -- what a container gets ---------------------------------------------------

    def device_nodes(self, phy_ids: Iterable[int], host_root: Path) -> list[DeviceNode]:
        """Device nodes for a container given these chips (device mode).

        The per-chip ``/dev/davinci<phy>`` nodes are always included; the shared
        nodes only when they exist under ``host_root``.
        """
        return self.chip_nodes(phy_ids) + self.shared_device_nodes(host_root)

    @staticmethod
    def chip_nodes(phy_ids: Iterable[int]) -> list[DeviceNode]:
        """The node of each chip, ``/dev/davinci<phy>``, the same path inside."""
        return [DeviceNode(f"/dev/davinci{phy}", f"/dev/davinci{phy}") for phy in phy_ids]

    def shared_device_nodes(self, host_root: Path) -> list[DeviceNode]:
        """The nodes every NPU container needs besides its chips, those present on the host.

        The first manager node found is seen as /dev/davinci_manager inside (the
        310B's /dev/davinci_manager_docker is preferred where it exists).
        """
        nodes = []
        manager = next((path for path in self.table.manager_nodes if _exists(host_root, path)), None)
        if manager is not None:
            nodes.append(DeviceNode(manager, "/dev/davinci_manager"))
        nodes.extend(DeviceNode(path, path) for path in self.table.shared_nodes if _exists(host_root, path))
        return nodes

    def driver_mounts(self, host_root: Path) -> list[HostMount]:
        """Read-only driver mounts for device mode, those present on the host."""
        return [HostMount(path, path) for path in self.table.driver_mounts if _exists(host_root, path)]

    def runtime_env(self, phy_ids: Iterable[int]) -> dict[str, str]:
        """Environment for Ascend-Docker-Runtime mode: the runtime does the mounting."""
        env = {
            "ASCEND_VISIBLE_DEVICES": ",".join(str(phy) for phy in phy_ids),
            "ASCEND_RUNTIME_OPTIONS": "",
        }
        env.update(self.table.runtime_env)
        return env


def _exists(host_root: Path, path: str) -> bool:
    return (host_root / path.lstrip("/")).exists()


def enumerate_chips(library: DeviceLibrary) -> list[Chip]:
    """DCMI's enumeration recipe: cards -> NPUs per card -> logic id -> physical id.

    Card ids come only from the card list (they may be slot numbers); device
    ids run 0..n-1 per card, where n counts NPUs only, so the MCU (at index n)
    is never asked for.
    """
    chips: list[Chip] = []
    for card_id in library.card_list():
        for device_id in range(library.device_count(card_id)):
            logic_id = library.logic_id(card_id, device_id)
            chips.append(
                Chip(
                    card_id=card_id,
                    device_id=device_id,
                    logic_id=logic_id,
                    phy_id=library.phy_id(logic_id),
                    info=library.chip_info(card_id, device_id),
                )
            )
    return chips
