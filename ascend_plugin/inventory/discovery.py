"""Discovery: open the chip library and find the chips, retrying until they appear.

A broken driver must not crash-loop the plugin, nor one bad card hide the others: an unreadable chip is
served unhealthy and read again; one the driver will not name is left out until a restart.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio

from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls, LaneStuck
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.resilience import Backoff, Retrier
from ascend_plugin.settings import Settings, family_overrides
from backends.backend import ChipBackend
from backends.chips import Chip, ChipAddress, Unnamed
from backends.errors import ChipError, NoChips
from backends.families import FAMILIES, FamilyTable, family_for, family_named
from backends.library import WITHOUT, ChipInfo, DeviceLibrary, SuperPodInfo
from backends.pci import PciSysfsError, chip_numa_node, node_cpulists
from backends.session import LibrarySession

log = logging.getLogger(__name__)

T = TypeVar("T")

DISCOVERY_BACKOFF = Backoff(1.0, 30.0)
READ_AGAIN_BACKOFF = Backoff(1.0, 15.0)  # a chip or card not read at start: asked again this often


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


@dataclass(frozen=True)
class Found:
    """One attempt's chips: read, not read yet (with why), and not named at all."""

    backend: ChipBackend
    chips: list[Chip]  # the chips with their chip info; unread ones carry a node-mate's meanwhile
    unread: dict[int, str]  # physical id -> why its chip info could not be read
    unnamed: list[Unnamed]


class Discovery:
    """Finds the node's chips through the chip calls, however long it takes."""

    def __init__(
        self,
        settings: DiscoverySettings,
        calls: ChipCalls,
        backoff: Backoff = DISCOVERY_BACKOFF,
        later: Backoff = READ_AGAIN_BACKOFF,
    ):
        self.settings = settings
        self.calls = calls
        self.backoff = backoff
        self.later = later  # how often a chip or card not read at start is asked again
        self.problem = "starting"  # why there are no chips yet, for /readyz
        self.node: Node | None = None  # what was found: once found, the process's for good
        self.unnamed: list[Unnamed] = []  # chips (or cards) the driver would not name at start
        self.named_later: list[str] = []  # of those, the ones it named since: only a restart serves them

    async def run(self) -> Node:
        """The node's backend and inventory, once the library answers; once per process (a restarted part
        gets the same node, instead of a second library session)."""
        if self.node is not None:
            return self.node
        retry = Retrier("chip discovery", self.backoff, logger=log)
        while True:
            try:
                found = await self._attempt()
                break
            except (ChipError, ChipCallError, OSError) as error:
                self.problem = str(error)
                await retry.wait_after(self.problem, said=f"chips not available: {error}", error=self.problem)
        self.unnamed = found.unnamed
        self.node = Node(found.backend, await self._gather_facts(found))
        return self.node

    def unserved(self) -> list[str]:
        """The chips not served as they should be, one line each, for /readyz (empty when none)."""
        lines = [
            f"{where}: the driver names it now; only a restart of the plugin serves it"
            for where in self.named_later
        ]
        lines += [
            f"{unnamed.where} not served: the driver does not name it ({unnamed.error}); asked again"
            for unnamed in self.unnamed
            if unnamed.where not in self.named_later
        ]
        if self.node is not None:
            inventory = self.node.inventory
            lines += [
                f"{inventory.table.chip_id(state.phy_id)} Unhealthy until read: {state.reason}"
                for state in inventory.chips()
                if state.unread
            ]
        return lines

    @property
    def restart_needed(self) -> str:
        """Why only a new process serves the node fully (a chip named since start); empty when none."""
        if not self.named_later:
            return ""
        return f"{', '.join(self.named_later)} answered after the plugin started: a restart serves it"

    async def _attempt(self) -> Found:
        session = LibrarySession(self.settings.open_library())
        try:
            missing = await self.calls.call(NODE, "dcmi_init", session.init)
            addresses, unnamed = await self.calls.call(NODE, "enumerate chips", session.address)
            if not addresses:
                named = "; ".join(f"{each.where}: {each.error}" for each in unnamed)
                raise NoChips(
                    f"{session.description} reports no NPU chips"
                    + (f" it can name ({named})" if named else "")
                )
            infos = await self._chip_infos(session, addresses)
            read = [(address, info) for address, info in infos if isinstance(info, ChipInfo)]
            if not read:
                first = infos[0][1]
                assert not isinstance(first, ChipInfo)
                raise NoChips(f"no chip's chip info can be read ({_why(first)})")
            forced = self.settings.chip_family
            families = self.settings.families
            family = family_named(forced, families) if forced else family_for(read[0][1], families)
        except BaseException:
            if self.calls.abandoned_threads == 0:  # no thread of ours is still inside the library
                await self.calls.call(NODE, "close", session.close)
            raise
        mate = read[0][1]  # what a chip not read yet is taken for meanwhile: nodes hold one kind of chip
        chips = [address.chip(info if isinstance(info, ChipInfo) else mate) for address, info in infos]
        unread = {address.phy_id: _why(info) for address, info in infos if not isinstance(info, ChipInfo)}
        others = sorted({info.chip_name for _, info in read if not family.claims(info)})
        if others:
            log.warning(
                "chips of another family are served as %s too: %s", family.TABLE.family, ", ".join(others)
            )
        table = family.TABLE.with_overrides(**self.settings.family_overrides)
        backend = family.for_chip(mate)(session, table)
        for function in sorted(missing):
            log.warning(
                "%s has no %s: %s",
                session.description,
                session.function_name(function),
                WITHOUT.get(function, "the plugin does without it"),
                extra={"function": session.function_name(function)},
            )
        log.info(
            "found %d chip(s) of family %s (%s) via %s",
            len(chips),
            table.family,
            mate.chip_name,
            session.description,
            extra={
                "family": table.family,
                "implementation": type(backend).__name__,
                "library": session.description,
            },
        )
        self._say_unserved(table, unread, unnamed)
        return Found(backend, chips, unread, unnamed)

    async def _chip_infos(
        self, session: LibrarySession, addresses: list[ChipAddress]
    ) -> list[tuple[ChipAddress, ChipInfo | ChipError | ChipCallError]]:
        """Each chip's chip info, read on the chip's own lane side by side, or why it could not be."""
        infos: dict[int, ChipInfo | ChipError | ChipCallError] = {}

        async def read(address: ChipAddress) -> None:
            try:
                infos[address.phy_id] = await self.calls.call(
                    address.phy_id, "chip_info", session.chip_info, address
                )
            except (ChipError, ChipCallError) as error:
                infos[address.phy_id] = error

        async with anyio.create_task_group() as group:
            for address in addresses:
                group.start_soon(read, address)
        return [(address, infos[address.phy_id]) for address in addresses]

    @staticmethod
    def _say_unserved(table: FamilyTable, unread: Mapping[int, str], unnamed: list[Unnamed]) -> None:
        for phy, why in unread.items():
            log.warning(
                "%s cannot be read (%s): it is served Unhealthy and read again until it answers",
                table.chip_id(phy),
                why,
                extra={"chip": phy, "device": table.chip_id(phy), "error": why},
            )
        for each in unnamed:
            log.error(
                "%s is not served: the driver does not name its chip (%s), so it has no device ID; it is "
                "asked again, and once it answers only a restart of the plugin serves it",
                each.where,
                each.error,
                extra={"card": each.card_id, "card_device": each.device_id, "error": str(each.error)},
            )

    async def _gather_facts(self, found: Found) -> Inventory:
        """Driver version and AI-core counts; warn about figures outside the family's bounds."""
        backend = found.backend
        try:
            driver_version = await self.calls.call(NODE, "driver_version", backend.session.driver_version)
        except (ChipError, ChipCallError) as error:
            log.warning("cannot read the driver version: %s", error)
            driver_version = ""
        units = backend.units(found.chips)
        reads_vnpus = self.settings.vnpus and backend.lists_vnpus()
        states = []
        for chip in found.chips:
            unread = found.unread.get(chip.phy_id, "")
            state = await self._read(backend, chip) if not unread else ChipState(chip, unread=unread)
            states.append(
                dataclasses.replace(state, unit=units[chip.phy_id], vnpus=None if reads_vnpus else ())
            )
        facts = NodeFacts(
            backend.table,
            backend.description,
            driver_version,
            frozenset(backend.lacking(*WITHOUT)),
            reads_vnpus,
            await self._super_pod(backend, [chip for chip in found.chips if chip.phy_id not in found.unread]),
        )
        return Inventory(facts, states)

    async def _read(self, backend: ChipBackend, chip: Chip) -> ChipState:
        """The chip with the facts its lane gives: AI cores, PCIe address and NUMA node, memory."""
        address = await self._optional(chip, "pcie_address", "PCIe address", backend.pcie_address)
        affinity = await self._optional(chip, "cpu_affinity", "CPU affinity", backend.cpu_affinity)
        ai_cores = await self._ai_cores(backend, chip)
        memory = await self._optional(chip, "memory", "device memory", backend.memory)
        try:
            numa_node = chip_numa_node(
                affinity, address, node_cpulists(self.settings.host_root), self.settings.host_root
            )
        except PciSysfsError as error:
            log.warning("cannot read the NUMA node of %s: %s", chip.label, error)
            numa_node = None
        return ChipState(
            chip,
            ai_cores=ai_cores,
            numa_node=numa_node,
            pcie_address=address,
            memory_mb=memory.total_mb if memory is not None else None,
        )

    # -- the chips not read at start ------------------------------------------------------

    async def read_the_rest(self) -> None:
        """Ask again, each on its own backoff, for the chips discovery could not read or name; a chip read is
        served from then on, a chip named is only said (the parts were built for the chips found)."""
        node = self.node
        if node is None:
            return
        async with anyio.create_task_group() as group:
            for state in node.inventory.chips():
                if state.unread:
                    group.start_soon(self._read_later, node, state.chip, name=f"reading chip {state.phy_id}")
            for unnamed in self.unnamed:
                if unnamed.where not in self.named_later:
                    group.start_soon(self._name_later, node, unnamed, name=f"naming {unnamed.where}")

    async def _read_later(self, node: Node, chip: Chip) -> None:
        inventory, backend = node.inventory, node.backend
        name = inventory.table.chip_id(chip.phy_id)
        retry = Retrier(f"reading {name}", self.later, logger=log)
        address = ChipAddress(chip.card_id, chip.device_id, chip.logic_id, chip.phy_id)
        while True:
            state = inventory.get(chip.phy_id)
            await anyio.sleep(self.later.after(retry.attempt + 1))
            try:
                info = await self.calls.call(chip.phy_id, "chip_info", backend.session.chip_info, address)
            except (ChipError, ChipCallError) as error:
                retry.failure(_why(error), level=logging.DEBUG, device=name)
                if state is not None and state.unread != _why(error):
                    inventory.set_unread(chip.phy_id, _why(error))
                continue
            break
        read = await self._read(backend, address.chip(info))
        inventory.set_read(read)
        log.info(
            "%s is read after %d failed attempt(s) since start: served, its health as its verdict says",
            name,
            retry.succeeded() + 1,
            extra={"device": name, "chip": chip.phy_id},
        )

    async def _name_later(self, node: Node, unnamed: Unnamed) -> None:
        session = node.backend.session
        for attempt in itertools.count(1):
            await anyio.sleep(self.later.after(attempt))
            try:
                named = await self.calls.call(NODE, f"name {unnamed.where}", _name, session, unnamed)
            except (ChipError, ChipCallError) as error:
                log.debug("%s is still not named: %s", unnamed.where, error)
                continue
            break
        self.named_later.append(unnamed.where)
        log.warning(
            "%s answers now (%s): the plugin serves the chips it found at start, so it is served after "
            "the plugin restarts; /healthz asks for that restart",
            unnamed.where,
            ", ".join(node.inventory.table.chip_id(address.phy_id) for address in named),
            extra={"card": unnamed.card_id, "chips": [address.phy_id for address in named]},
        )

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

    async def _optional(self, chip: Chip, name: str, what: str, read: Callable[[Chip], T]) -> T | None:
        """A fact the chip's lane reads (None where the driver does not say); a call that fails is said."""
        try:
            return await self.calls.call(chip.phy_id, name, read, chip)
        except ChipCallError as error:
            log.warning("cannot read the %s of %s: %s", what, chip.label, error)
            return None

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


def _why(error: ChipError | ChipCallError) -> str:
    """Why a chip is not read, in words that stay the same while the cause does (no countdown)."""
    return error.stuck.overran if isinstance(error, LaneStuck) else str(error)


def _name(session: LibrarySession, unnamed: Unnamed) -> list[ChipAddress]:
    """The chips at ``unnamed``'s place once the driver names them (DcmiError while it still will not)."""
    found, still = session.address()
    for each in still:
        if each.card_id == unnamed.card_id and unnamed.device_id in (None, each.device_id):
            raise each.error
    return [
        address
        for address in found
        if address.card_id == unnamed.card_id and unnamed.device_id in (None, address.device_id)
    ]
