"""Discovery: open the chip library and find the chips, retrying until they appear.

A node whose driver is missing, not yet loaded or broken must not crash-loop
the plugin: discovery logs one clear line per distinct problem, keeps it for
/readyz, and retries with backoff. Once the chips are found it gathers the
facts the other parts publish (driver version, AI cores, which optional driver
functions are missing) and warns about an implausible AI-core figure, but never
refuses a chip for it: Huawei's plugin exits on a 310B1's 1.0 AI cores and takes
every healthy chip off the node. The chips' names pick the family, and discovery
builds that family's backend over the opened library: everything after it asks
the family's backend, not the family's name. It also decides whether the chips'
vNPUs are read (``vnpu=static`` or ``dynamic`` on a family whose chips can be
split, a driver with VDEV_MNG); the health monitor reads them, first before the kubelet's
first list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.resilience import Backoff, Retrier
from ascend_plugin.settings import Settings, family_overrides
from backends.backend import DEVICE_INFO, WITHOUT, ChipBackend
from backends.chips import Chip
from backends.errors import ChipError, NoChips
from backends.families import FAMILIES, family_for, family_named
from backends.library import DeviceLibrary, PcieAddress, SuperPodInfo
from backends.pci import PciSysfsError, numa_node
from backends.session import LibrarySession

log = logging.getLogger(__name__)

DISCOVERY_BACKOFF = Backoff(1.0, 30.0)


def open_library(settings: Settings, path: Path | None = None) -> DeviceLibrary:
    """The device library the settings ask for (not initialised yet); ``path`` overrides the DCMI one."""
    if settings.backend == "fake":
        from backends.fake import FakeLibrary

        assert settings.fake_scenario is not None  # enforced by Settings
        return FakeLibrary(settings.fake_scenario)
    from backends.dcmi import DcmiLibrary

    return DcmiLibrary(path or settings.dcmi_library, allow_untrusted=settings.dcmi_allow_untrusted_library)


@dataclass(frozen=True)
class DiscoverySettings:
    """What discovery needs to know from the settings."""

    open_library: Callable[[], DeviceLibrary]
    chip_family: str | None  # forced family, or None to detect it
    family_overrides: Mapping[str, object]
    host_root: Path = Path("/")  # where the host's /sys is seen (NUMA nodes)
    vnpus: bool = True  # read the chips' vNPUs where the family has them (vnpu static or dynamic)
    families: tuple[type[ChipBackend], ...] = FAMILIES  # the families chip names pick from, in order

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscoverySettings:
        return cls(
            lambda: open_library(settings),
            settings.chip_family,
            family_overrides(settings),
            settings.host_root,
            settings.vnpu != "off",
        )


@dataclass(frozen=True)
class Node:
    """What discovery found: the family's backend it reaches the chips through, and their inventory."""

    backend: ChipBackend
    inventory: Inventory


class Discovery:
    """Finds the node's chips through the chip calls, however long it takes."""

    def __init__(self, settings: DiscoverySettings, calls: ChipCalls, backoff: Backoff = DISCOVERY_BACKOFF):
        self.settings = settings
        self.calls = calls
        self.backoff = backoff
        self.problem = "starting"  # why there are no chips yet, for /readyz
        self.node: Node | None = None  # what was found: once found, the process's for good

    async def run(self) -> Node:
        """The node's backend and inventory, once the library answers.

        The chips are found once per process: asked again (a part restarted by
        its supervisor), it returns the same node, whose library stays
        initialised, instead of initialising the library a second time and
        leaving the first session open.
        """
        if self.node is not None:
            return self.node
        retry = Retrier("chip discovery", self.backoff, logger=log)
        while True:
            try:
                backend, chips = await self._attempt()
                break
            except (ChipError, ChipCallError, OSError) as error:
                self.problem = str(error)
                await retry.wait_after(self.problem, said=f"chips not available: {error}", error=self.problem)
        self.node = Node(backend, await self._gather_facts(backend, chips))
        return self.node

    async def _attempt(self) -> tuple[ChipBackend, list[Chip]]:
        session = LibrarySession(self.settings.open_library())
        try:
            missing = await self.calls.call(NODE, "dcmi_init", session.init)
            chips = await self.calls.call(NODE, "enumerate chips", session.discover)
            if not chips:
                raise NoChips(f"{session.description} reports no NPU chips")
            forced = self.settings.chip_family
            families = self.settings.families
            family = family_named(forced, families) if forced else family_for(chips[0].info, families)
        except BaseException:
            if self.calls.stuck(None) is None:
                await self.calls.call(NODE, "close", session.close)
            raise
        others = sorted({chip.info.chip_name for chip in chips if not family.claims(chip.info)})
        if others:
            log.warning(
                "chips of another family are served as %s too: %s", family.TABLE.family, ", ".join(others)
            )
        table = family.TABLE.with_overrides(**self.settings.family_overrides)
        backend = family.for_chip(chips[0].info)(session, table)
        for function in sorted(missing):
            log.warning(
                "%s has no %s: %s",
                session.description,
                function,
                WITHOUT.get(function, "the plugin does without it"),
                extra={"function": function},
            )
        log.info(
            "found %d chip(s) of family %s (%s) via %s",
            len(chips),
            table.family,
            chips[0].info.chip_name,
            session.description,
            extra={
                "family": table.family,
                "implementation": type(backend).__name__,
                "library": session.description,
            },
        )
        return backend, chips

    async def _gather_facts(self, backend: ChipBackend, chips: list[Chip]) -> Inventory:
        """Driver version and AI-core counts; warn about figures outside the family's bounds."""
        try:
            driver_version = await self.calls.call(NODE, "driver_version", backend.session.driver_version)
        except (ChipError, ChipCallError) as error:
            log.warning("cannot read the driver version: %s", error)
            driver_version = ""
        units = backend.units(chips)
        reads_vnpus = self.settings.vnpus and backend.splits_into_vnpus and DEVICE_INFO not in backend.missing
        states = []
        for chip in chips:
            ai_cores = await self._ai_cores(backend, chip)
            address = await self._pcie_address(backend, chip)
            states.append(
                ChipState(
                    chip,
                    ai_cores=ai_cores,
                    unit=units[chip.phy_id],
                    numa_node=self._numa_node(chip, address),
                    pcie_address=address,
                    memory_mb=await self._memory_mb(backend, chip),
                    vnpus=None if reads_vnpus else (),
                )
            )
        facts = NodeFacts(
            backend.table,
            backend.description,
            driver_version,
            frozenset(backend.missing),
            reads_vnpus,
            await self._super_pod(backend, chips),
        )
        return Inventory(facts, states)

    async def _super_pod(self, backend: ChipBackend, chips: list[Chip]) -> SuperPodInfo | None:
        """The node's place in its super pod, from the first chip that says (A3 only; else None)."""
        failures = []
        for chip in chips:
            try:
                return await self.calls.call(chip.phy_id, "super_pod", backend.super_pod, chip)
            except (ChipError, ChipCallError) as error:
                failures.append(f"{chip.label}: {error}")
        if failures:
            log.warning(
                "no chip could say the node's super pod (%s); the device-info ConfigMap says SuperPodID "
                "and ServerIndex -2",
                "; ".join(failures),
            )
        return None

    async def _pcie_address(self, backend: ChipBackend, chip: Chip) -> PcieAddress | None:
        """Where the chip sits on PCI; None where the driver does not say."""
        try:
            return await self.calls.call(chip.phy_id, "pcie_address", backend.pcie_address, chip)
        except ChipCallError as error:
            log.warning("cannot read the PCIe address of %s: %s", chip.label, error)
            return None

    def _numa_node(self, chip: Chip, address: PcieAddress | None) -> int | None:
        """The chip's NUMA node, from its PCIe address and the host's sysfs; None when unknown."""
        if address is None:
            return None
        try:
            return numa_node(address, self.settings.host_root)
        except PciSysfsError as error:
            log.warning("cannot read the NUMA node of %s: %s", chip.label, error)
            return None

    async def _memory_mb(self, backend: ChipBackend, chip: Chip) -> int | None:
        """The chip's device memory in MiB; None where the driver does not say."""
        try:
            info = await self.calls.call(chip.phy_id, "memory", backend.memory, chip)
        except ChipCallError as error:
            log.warning("cannot read the device memory of %s: %s", chip.label, error)
            return None
        return info.total_mb if info is not None else None

    async def _ai_cores(self, backend: ChipBackend, chip: Chip) -> float | None:
        table = backend.table
        try:
            figure = await self.calls.call(chip.phy_id, "ai_cores", backend.ai_cores, chip)
        except (ChipError, ChipCallError) as error:
            log.warning("cannot read the AI-core count of %s: %s", chip.label, error)
            return None
        if not table.ai_cores_in_bounds(figure.value):
            log.warning(
                "%s of family %s reports %g AI cores (from %s), outside the family's bounds [%g, %g]; "
                "the chip is served anyway. If this figure is right for your hardware, set "
                "ai_core_min/ai_core_max (--ai-core-min/--ai-core-max, ASCEND_DP_AI_CORE_MIN/_MAX, "
                "or the Helm values settings.aiCoreMin/aiCoreMax)",
                chip.label,
                table.family,
                figure.value,
                figure.source,
                table.ai_core_min,
                table.ai_core_max,
                extra={"chip": chip.phy_id, "family": table.family, "ai_cores": figure.value},
            )
        return figure.value
