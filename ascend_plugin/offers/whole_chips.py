"""Whole chips: each chip offered once, under the family's resource name, as Huawei names it.

A chip split into static vNPUs is not offered whole: its vNPUs are
(:mod:`ascend_plugin.offers.vnpus`), and a pod given the whole chip would share
silicon with theirs.
"""

from __future__ import annotations

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice, chip_health
from backends.families import FamilyTable


def chip_node(phy_id: int) -> DeviceNode:
    """The chip's own node, ``/dev/davinci<phy>``, the same path inside."""
    return DeviceNode(f"/dev/davinci{phy_id}", f"/dev/davinci{phy_id}")


def chip_device(table: FamilyTable, form: IdForm, state: ChipState, device_id: str) -> OfferedDevice:
    """A device that hands over the chip of ``state`` as a whole (the chip itself, or a share of it)."""
    healthy, reason = chip_health([state])
    return OfferedDevice(
        id=device_id,
        resource=table.resource_name,
        form=form,
        chips=(state.phy_id,),
        node=chip_node(state.phy_id),
        visible=str(state.phy_id),
        cdi_name=str(state.phy_id),
        healthy=healthy,
        reason=reason,
        unit=state.unit,
        numa_node=state.numa_node,
    )


class WholeChips:
    """Every chip that carries no vNPUs as one device of the family's resource."""

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        form = IdForm(table.device_id_prefix, ("physical id",))
        return [
            chip_device(table, form, state, table.chip_id(state.phy_id))
            for state in inventory.chips()
            if not state.split
        ]
