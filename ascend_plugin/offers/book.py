"""OfferBook: the node's offers combined, devices grouped by resource, current with the inventory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.offers.base import Offer, OfferedDevice


class OfferBook:
    """Every offered device by resource name, recomputed when the inventory changes."""

    def __init__(self, inventory: Inventory, offers: Sequence[Offer]) -> None:
        self.inventory = inventory
        self.offers = tuple(offers)
        self._version = -1
        self._resources: Mapping[str, tuple[OfferedDevice, ...]] = MappingProxyType({})
        self._by_id: Mapping[tuple[str, str], OfferedDevice] = MappingProxyType({})

    @property
    def version(self) -> int:
        return self.inventory.version

    def resources(self) -> Mapping[str, tuple[OfferedDevice, ...]]:
        self._refresh()
        return self._resources

    def devices(self, resource: str) -> tuple[OfferedDevice, ...]:
        return self.resources().get(resource, ())

    def get(self, resource: str, device_id: str) -> OfferedDevice | None:
        self._refresh()
        return self._by_id.get((resource, device_id))

    async def wait_for_change(self, seen_version: int) -> int:
        """Return once the inventory (and so possibly the book) has changed, or closed."""
        return await self.inventory.wait_for_change(seen_version)

    def _refresh(self) -> None:
        if self._version == self.inventory.version:
            return
        grouped: dict[str, list[OfferedDevice]] = {}
        for offer in self.offers:
            for device in offer.devices(self.inventory):
                grouped.setdefault(device.resource, []).append(device)
        self._resources = MappingProxyType({name: tuple(devices) for name, devices in grouped.items()})
        self._by_id = MappingProxyType(
            {(device.resource, device.id): device for devices in grouped.values() for device in devices}
        )
        self._version = self.inventory.version
