"""A node's inventory, offers and handover built straight from a library, without a running plugin.

For tests of one layer at a time: the chips a library reports, under the
family its chip name picks (or the one given), offered whole and handed over
in any mode.
"""

from __future__ import annotations

from pathlib import Path

from ascend_plugin.handover.cdi import CdiSpec
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.handover.modes import MODES, Handover, HandoverContext, HandoverMode
from ascend_plugin.inventory.inventory import ChipHealth, ChipState, Inventory, NodeFacts
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.whole_chips import WholeChips
from backends.chips import enumerate_chips
from backends.families import FamilyTable, family_for
from backends.library import DeviceLibrary

HEALTHY = ChipHealth(known=True, healthy=True, reason="")


def inventory_of(
    library: DeviceLibrary, table: FamilyTable | None = None, *, healthy: bool = True
) -> Inventory:
    """The chips of an initialised ``library``, every one healthy unless told otherwise."""
    chips = enumerate_chips(library)
    chosen = table or family_for(chips[0].info)
    health = HEALTHY if healthy else ChipHealth()
    return Inventory(NodeFacts(chosen, library.description), [ChipState(chip, health) for chip in chips])


def whole_chips(library: DeviceLibrary, table: FamilyTable | None = None) -> list[OfferedDevice]:
    """Every chip of ``library`` offered whole."""
    return WholeChips().devices(inventory_of(library, table))


def handover(
    mode: HandoverMode, table: FamilyTable, host_root: Path, spec_dir: Path | None = None
) -> Handover:
    """The handover ``mode`` for a node of ``table`` whose host file system is under ``host_root``."""
    host = HostDevices(table, host_root)
    cdi = CdiSpec("huawei.com/npu", spec_dir or host_root / "var/run/cdi", host)
    return MODES[mode](HandoverContext(table, host, cdi))
