"""Inventory: the node's chips and their health verdicts, with a version and subscriptions.

A chip whose health is not known yet, one out for a hot reset or one discovery could not read is never
offered healthy.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ascend_plugin.changes import Followable
from ascend_plugin.inventory.verdict import Verdict
from backends.chips import Chip
from backends.families import FamilyTable
from backends.library import PcieAddress, SuperPodInfo, VdevInfo
from backends.topology import TopologyUnit

log = logging.getLogger(__name__)


UNKNOWN = Verdict()


@dataclass(frozen=True)
class ChipState:
    chip: Chip
    health: Verdict = UNKNOWN
    ai_cores: float | None = None  # the figure the chip reported, if it could be read
    unit: TopologyUnit | None = None  # the ring, card or mesh group it shares a fast link with
    numa_node: int | None = None  # the NUMA node of its PCIe device, where the host says
    pcie_address: PcieAddress | None = None  # where it sits on PCI, where the driver says
    memory_mb: int | None = None  # its device memory (HBM or DDR), where the driver says
    # The static vNPUs carved out of it, by id; None while they could not be read yet.
    vnpus: tuple[VdevInfo, ...] | None = ()
    # Its reset group is out for a hot reset (set by the hot-reset manager): never offered meanwhile.
    resetting: bool = False
    # Why discovery could not read it yet (its facts are then unknown); empty once read.
    unread: str = ""

    @property
    def phy_id(self) -> int:
        return self.chip.phy_id

    @property
    def split(self) -> bool:
        """The chip carries vNPUs: it must not be offered whole or shared, or two pods get one silicon."""
        return bool(self.vnpus)

    @property
    def healthy(self) -> bool:
        """Healthy for the kubelet: the verdict says so, discovery read it, and no hot reset has it out."""
        return self.health.healthy and not self.resetting and not self.unread

    @property
    def reason(self) -> str:
        """Why it is unhealthy (empty when healthy): a hot reset, a chip not read yet, else the verdict's."""
        if self.resetting:
            return RESETTING
        return f"{UNREAD}: {self.unread}" if self.unread else self.health.reason


RESETTING = "being hot reset with its reset group"
UNREAD = "not read yet at start"


@dataclass(frozen=True)
class NodeFacts:
    """What discovery learned about the node as a whole."""

    table: FamilyTable  # the family's table, with the operator's overrides
    library: str  # where the chips come from (library path or fake scenario)
    driver_version: str = ""
    missing_functions: frozenset[str] = frozenset()  # optional DCMI functions the library lacks
    reads_vnpus: bool = False  # whether the chips' vNPUs are read (vnpu static or dynamic on 310P, 910)
    # Where an A3 node sits in its super pod (read once at start); None: not an A3, or no chip could say.
    super_pod: SuperPodInfo | None = None


Transition = Callable[[ChipState, ChipState], None]


class Inventory(Followable):
    """The node's chips by physical id, with change notification."""

    def __init__(self, facts: NodeFacts, chips: Iterable[ChipState]) -> None:
        super().__init__()
        self.facts = facts
        self._chips: dict[int, ChipState] = {state.phy_id: state for state in chips}
        self._by_logic = MappingProxyType(
            {state.chip.logic_id: state.phy_id for state in self._chips.values()}
        )
        self._ordered = self._sorted()
        self._transition_listeners: list[Transition] = []
        self._vnpu_edits: dict[int, int] = {}  # per chip: makes and destroys ended, for stale poll reads

    @property
    def table(self) -> FamilyTable:
        return self.facts.table

    @property
    def closed(self) -> bool:
        """True once the plugin is shutting down; waiters return at once."""
        return self._changes.closed

    @property
    def chip_name(self) -> str:
        """The first chip's name, e.g. 310B1 (nodes hold one kind of chip)."""
        return self._ordered[0].chip.info.chip_name if self._ordered else ""

    def chips(self) -> tuple[ChipState, ...]:
        return self._ordered

    def get(self, phy_id: int) -> ChipState | None:
        return self._chips.get(phy_id)

    def by_logic_id(self, logic_id: int) -> ChipState | None:
        """The chip with this logic id (fault events name chips by logic id)."""
        phy = self._by_logic.get(logic_id)
        return self._chips.get(phy) if phy is not None else None

    def ai_cores(self) -> Mapping[int, float]:
        """Physical id -> AI-core figure, for the chips whose figure is known."""
        return {state.phy_id: state.ai_cores for state in self._ordered if state.ai_cores is not None}

    def on_transition(self, listener: Transition) -> Callable[[], None]:
        """Call ``listener(old, new)`` whenever a chip's health flips; return the way to stop (a restarted
        part takes its listener back)."""
        self._transition_listeners.append(listener)
        return lambda: self._transition_listeners.remove(listener)

    def set_health(self, phy_id: int, health: Verdict) -> bool:
        old = self._chips[phy_id]
        if old.health == health:  # every poll of every chip comes here: the common case costs one compare
            return False
        return self._replace(dataclasses.replace(old, health=health))

    def set_unread(self, phy_id: int, why: str) -> bool:
        """Why discovery still cannot read the chip (it stays unhealthy); return True if anything changed."""
        return self._replace(dataclasses.replace(self._chips[phy_id], unread=why))

    def set_read(self, read: ChipState) -> bool:
        """Discovery read a chip it could not at start: its chip and facts from ``read``, the rest kept."""
        return self._replace(
            dataclasses.replace(
                self._chips[read.phy_id],
                chip=read.chip,
                ai_cores=read.ai_cores,
                numa_node=read.numa_node,
                pcie_address=read.pcie_address,
                memory_mb=read.memory_mb,
                unread="",
            )
        )

    def set_resetting(self, phy_ids: Iterable[int], resetting: bool) -> bool:
        """Mark chips as out for a hot reset (or back from one); return True if anything changed."""
        return self._replace(*(dataclasses.replace(self._chips[phy], resetting=resetting) for phy in phy_ids))

    def set_vnpus(self, phy_id: int, vnpus: tuple[VdevInfo, ...], *, read_at: int | None = None) -> bool:
        """Record the chip's vNPUs. A poll passes the :meth:`vnpu_edits` it saw before its read: a read a
        make or destroy overtook is stale and dropped (it would bring back a vNPU just destroyed), unless
        nothing is known yet."""
        old = self._chips[phy_id]
        if read_at is not None and read_at != self.vnpu_edits(phy_id) and old.vnpus is not None:
            return False
        return self._replace(dataclasses.replace(old, vnpus=vnpus))

    def vnpu_edits(self, phy_id: int) -> int:
        """How many makes and destroys of the chip's vNPUs have ended (a read begun before one is stale)."""
        return self._vnpu_edits.get(phy_id, 0)

    def vnpus_edited(self, phy_id: int) -> None:
        """A make or destroy of the chip's vNPUs ended (or gave up): reads begun before it are stale."""
        self._vnpu_edits[phy_id] = self.vnpu_edits(phy_id) + 1

    def _replace(self, *states: ChipState) -> bool:
        """Put each state in its chip's place: one new version, then each flip told; True if any changed."""
        flipped = []
        for new in states:
            old = self._chips[new.phy_id]
            if new != old:
                self._chips[new.phy_id] = new
                flipped.append((old, new))
        if not flipped:
            return False
        self._ordered = self._sorted()
        self._changes.bump()
        for old, new in flipped:
            if new.healthy != old.healthy:
                self._tell(old, new)
        return True

    def close(self) -> None:
        self._changes.close()

    def _tell(self, old: ChipState, new: ChipState) -> None:
        """Tell every transition listener, after the change is counted: one that raises stops nothing."""
        for listener in list(self._transition_listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("a listener of chip %d's health transition failed", new.phy_id)

    def _sorted(self) -> tuple[ChipState, ...]:
        return tuple(sorted(self._chips.values(), key=lambda state: state.phy_id))
