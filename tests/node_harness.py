"""A node's inventory, offers and handover built straight from a library, without a running plugin.

For tests of one layer at a time: the chips a library reports, under the
family its chip name picks (or the one given), the family's backend over it,
offered whole and handed over in any mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fake_dcmi.players import ScenarioPlayer

from ascend_plugin.chip_calls import NODE, ChipCalls
from ascend_plugin.handover.cdi import CdiSpec
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.handover.modes import MODES, Handover, HandoverContext, HandoverMode
from ascend_plugin.inventory.discovery import Discovery, DiscoverySettings
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.inventory.verdict import Verdict
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.node_offers import WholeChips
from backends.backend import ChipBackend
from backends.fake import FakeScenario
from backends.families import FamilyTable, family_for, family_named
from backends.library import DeviceLibrary
from backends.session import LibrarySession

HEALTHY = Verdict(known=True, healthy=True, reason="")


def inventory_of(
    library: DeviceLibrary, table: FamilyTable | None = None, *, healthy: bool = True
) -> Inventory:
    """The chips of an initialised ``library``, every one healthy unless told otherwise."""
    chips = LibrarySession(library).discover()
    chosen = table or family_for(chips[0].info).TABLE
    health = HEALTHY if healthy else Verdict()
    return Inventory(NodeFacts(chosen, library.description), [ChipState(chip, health) for chip in chips])


class CallCounter:
    """A real library, with a count of the calls made through it (pass it on as a DeviceLibrary)."""

    def __init__(self, library: DeviceLibrary) -> None:
        self.library = library
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.library, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any) -> Any:
            self.calls[name] += 1
            return attribute(*args)

        return counted


def backend_of(library: DeviceLibrary, table: FamilyTable | None = None) -> ChipBackend:
    """The backend of an initialised ``library``: its first chip's family (or ``table``'s), over ``table``."""
    session = LibrarySession(library)
    session.missing.update(library.missing_functions())
    info = session.discover()[0].info
    family = family_named(table.family) if table else family_for(info)
    return family.for_chip(info)(session, table)


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


async def discovered(
    player: ScenarioPlayer[Any], calls: ChipCalls, scenario: Mapping[str, Any], host_root: Path = Path("/")
) -> Inventory:
    """The inventory discovery gathers from ``scenario`` on ``player``'s fake (the library closed after).

    ``host_root``: where the host's /sys is seen (NUMA nodes, PCIe devices).
    """
    player.update(FakeScenario.model_validate(scenario))
    settings = DiscoverySettings(lambda: player.open(init=False), None, {}, host_root)
    node = await Discovery(settings, calls).run()
    await calls.call(NODE, "close", node.backend.close)
    return node.inventory
