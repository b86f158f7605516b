"""Whole chips: each chip offered once, under the family's resource name, as Huawei names it."""

from __future__ import annotations

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice, chip_health
from backends.families import FamilyTable


def chip_node(phy_id: int) -> DeviceNode:
    """The chip's own node, ``/dev/davinci<phy>``, the same path inside."""
    return DeviceNode(f"/dev/davinci{phy_id}", f"/dev/davinci{phy_id}")


class WholeChips:
    """Every chip as one device of the family's resource."""

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        form = IdForm(table.device_id_prefix, ("physical id",))
        return [self._device(table, form, state) for state in inventory.chips()]

    @staticmethod
    def _device(table: FamilyTable, form: IdForm, state: ChipState) -> OfferedDevice:
        healthy, reason = chip_health([state])
        return OfferedDevice(
            id=table.chip_id(state.phy_id),
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
