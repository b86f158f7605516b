"""Whole chips: each chip offered once (or ``shares`` times) as a device of the family's resource.

A chip's ID is ``<prefix>-<phy>`` (``Ascend910-3``), a share's ``<prefix>-<phy>-<i>``
(Huawei's ``shareDevCount``: pod specs written for Huawei's plugin keep working);
every share hands over its chip. A chip split into vNPUs is neither offered
whole nor shared: its vNPUs are (:mod:`ascend_plugin.offers.vnpus`). docs/sharing.md.
"""

from __future__ import annotations

import logging

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice, chip_health
from backends.families import FamilyTable

log = logging.getLogger(__name__)


def chip_node(number: int) -> DeviceNode:
    """The chip's own node, ``/dev/davinci<N>``, the same path inside (N: the family's device number)."""
    return DeviceNode(f"/dev/davinci{number}", f"/dev/davinci{number}")


def node_of(table: FamilyTable, state: ChipState) -> DeviceNode:
    """The chip's own node: ``/dev/davinci<physical id>``, on a 950 ``/dev/davinci<logical id>``."""
    return chip_node(table.device_number(state.chip))


def chip_device(table: FamilyTable, form: IdForm, state: ChipState, device_id: str) -> OfferedDevice:
    """A device that hands over the chip of ``state`` whole; its node and ``ASCEND_VISIBLE_DEVICES`` by
    the family's device number (the logical id on a 950)."""
    healthy, reason = chip_health([state])
    return OfferedDevice(
        id=device_id,
        resource=table.resource_name,
        form=form,
        chips=(state.phy_id,),
        node=node_of(table, state),
        visible=str(table.device_number(state.chip)),
        cdi_name=str(state.phy_id),
        healthy=healthy,
        reason=reason,
        unit=state.unit,
        numa_node=state.numa_node,
    )


class WholeChips:
    """Every chip that carries no vNPUs as ``shares`` devices of the family's resource (one: the chip)."""

    def __init__(self, shares: int = 1) -> None:
        self.shares = shares
        self._withdrawn: set[int] = set()  # shared chips that carry vNPUs now (and were said so)

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        fields = ("physical id",) if self.shares == 1 else ("physical id", "share")
        form = IdForm(table.device_id_prefix, fields)
        devices: list[OfferedDevice] = []
        for state in inventory.chips():
            if self._split(table, state):
                continue
            chip_id = table.chip_id(state.phy_id)
            ids = [chip_id] if self.shares == 1 else [f"{chip_id}-{index}" for index in range(self.shares)]
            devices += [chip_device(table, form, state, device_id) for device_id in ids]
        return devices

    def _split(self, table: FamilyTable, state: ChipState) -> bool:
        """True when the chip carries vNPUs now; the first time, a shared chip's warning says so."""
        if not state.split:
            self._withdrawn.discard(state.phy_id)
            return False
        if self.shares > 1 and state.phy_id not in self._withdrawn:
            self._withdrawn.add(state.phy_id)
            log.warning(
                "%s now carries vNPUs: its %d shares are withdrawn and its vNPUs offered instead "
                "(share_count and vNPUs on one chip do not go together)",
                table.chip_id(state.phy_id),
                self.shares,
                extra={"chip": state.phy_id},
            )
        return True
