"""Shares: each chip offered ``count`` times, for drivers that let several containers open one chip.

Huawei's ``shareDevCount``: on 310B and 310P, whose driver has a device-share
mode, a chip can serve several inference pods at once. Each chip becomes
``count`` devices of the family's usual resource, ``<prefix>-<phy>-<i>`` for
i = 0..count-1 (``Ascend310-0-3``, ``Ascend310P-1-3``), so pod specs and quotas
written for Huawei's plugin keep working. Every share hands over its chip (the
handover modes give a container the chip once, however many of its shares it
holds), and a share is healthy exactly while its chip is.

A chip that carries vNPUs is not shared: start-up refuses that combination
(:mod:`ascend_plugin.offers.node_offers`), and a chip split while the plugin runs
loses its shares, with a warning, while its vNPUs are offered.
"""

from __future__ import annotations

import logging

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import IdForm, OfferedDevice
from ascend_plugin.offers.whole_chips import chip_device
from backends.families import FamilyTable

log = logging.getLogger(__name__)


class Shares:
    """Every chip that carries no vNPUs as ``count`` devices of the family's resource."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._withdrawn: set[int] = set()  # chips whose shares were withdrawn (and said so)

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        form = IdForm(table.device_id_prefix, ("physical id", "share"))
        devices: list[OfferedDevice] = []
        for state in inventory.chips():
            if not self._withdraw(table, state):
                chip_id = table.chip_id(state.phy_id)
                devices.extend(
                    chip_device(table, form, state, f"{chip_id}-{index}") for index in range(self.count)
                )
        return devices

    def _withdraw(self, table: FamilyTable, state: ChipState) -> bool:
        """True when the chip carries vNPUs now; the first time, say that its shares are gone."""
        if not state.split:
            self._withdrawn.discard(state.phy_id)
            return False
        if state.phy_id not in self._withdrawn:
            self._withdrawn.add(state.phy_id)
            log.warning(
                "%s now carries vNPUs: its %d shares are withdrawn and its vNPUs offered instead "
                "(share_count and vNPUs on one chip do not go together)",
                table.chip_id(state.phy_id),
                self.count,
                extra={"chip": state.phy_id},
            )
        return True
