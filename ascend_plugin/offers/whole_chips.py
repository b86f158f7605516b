"""Whole chips: each chip offered once, under the family's resource name, as Huawei names it.

A chip split into static vNPUs is not offered whole: its vNPUs are
(:mod:`ascend_plugin.offers.vnpus`), and a pod given the whole chip would share
silicon with theirs.
"""

from __future__ import annotations

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice, chip_health
from backends.families import FamilyTable


def chip_node(number: int) -> DeviceNode:
    """The chip's own node, ``/dev/davinci<N>``, the same path inside (N: the family's device number)."""
    return DeviceNode(f"/dev/davinci{number}", f"/dev/davinci{number}")


def node_of(table: FamilyTable, state: ChipState) -> DeviceNode:
    """The chip's own node: ``/dev/davinci<physical id>``, on a 950 ``/dev/davinci<logical id>``."""
    return chip_node(table.device_number(state.chip))


def chip_device(table: FamilyTable, form: IdForm, state: ChipState, device_id: str) -> OfferedDevice:
    """A device that hands over the chip of ``state`` as a whole (the chip itself, or a share of it).

    Its ID names the physical id; its node and ``ASCEND_VISIBLE_DEVICES`` the
    family's device number (the logical id on a 950).
    """
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
    """Every chip that carries no vNPUs as one device of the family's resource."""

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        form = IdForm(table.device_id_prefix, ("physical id",))
        return [
            chip_device(table, form, state, table.chip_id(state.phy_id))
            for state in inventory.chips()
            if not state.split
        ]
