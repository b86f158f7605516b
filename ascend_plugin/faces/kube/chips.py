"""The node's chips under the names Huawei's objects use (``Ascend310-0``): the ConfigMap, Events and labels
speak of physical chips, not of the devices the offers make of them."""

from __future__ import annotations

from dataclasses import dataclass

from ascend_plugin.faults import Fault, FaultLevel
from ascend_plugin.inventory.inventory import ChipState, Inventory


@dataclass(frozen=True)
class ChipView:
    """One chip and its verdict, under its whole-chip device ID."""

    id: str
    state: ChipState

    @property
    def healthy(self) -> bool:
        return self.state.healthy

    @property
    def reason(self) -> str:
        return self.state.reason

    @property
    def faults(self) -> tuple[Fault, ...]:
        return self.state.health.faults

    @property
    def worst_level(self) -> FaultLevel:
        return self.state.health.worst_level

    @property
    def codes(self) -> list[str]:
        return self.state.health.codes


def chip_views(inventory: Inventory) -> list[ChipView]:
    """Every chip of the inventory, by physical id."""
    return [ChipView(inventory.table.chip_id(state.phy_id), state) for state in inventory.chips()]
