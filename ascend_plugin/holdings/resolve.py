"""From what the kubelet lists to the chips behind it: device-plugin IDs, Volcano's kubelet IDs, DRA
claims.

The kubelet's IDs are the offer book's devices, or in Volcano mode only a count (:class:`Assignments` says
which chip each stands for); without a book (the DRA driver) a device plugin's IDs are read by their names
(:class:`DevicePluginIds`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from ascend_plugin.changes import Changes
from ascend_plugin.holdings.pod_resources import ClaimDevice
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.book import OfferBook


class Assignments:
    """Per resource, the real device handed over for each kubelet device ID (Volcano mode), one to one."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, str]] = {}
        self.changes = Changes()

    def mapping(self, resource: str) -> Mapping[str, str]:
        """Kubelet ID -> real device ID of one resource."""
        return MappingProxyType(dict(self._maps.get(resource, {})))

    def record(self, resource: str, kubelet_ids: Sequence[str], real_ids: Sequence[str]) -> None:
        """``kubelet_ids[i]`` now stands for ``real_ids[i]``; the earlier pairs of either are dropped."""
        if len(kubelet_ids) != len(real_ids) or len(set(kubelet_ids)) != len(kubelet_ids):
            raise ValueError(
                f"cannot pair kubelet IDs {list(kubelet_ids)} with real devices {list(real_ids)}: "
                "both must be lists of distinct IDs of the same length"
            )
        current = self._maps.setdefault(resource, {})
        taken_keys, taken_values = set(kubelet_ids), set(real_ids)
        updated = {k: r for k, r in current.items() if k not in taken_keys and r not in taken_values}
        updated.update(zip(kubelet_ids, real_ids, strict=True))
        if updated != current:
            self._maps[resource] = updated
            self.changes.bump()

    def real_of(self, resource: str, kubelet_ids: Sequence[str]) -> tuple[str, ...] | None:
        """The real devices behind ``kubelet_ids``, or None if any of them is not mapped."""
        mapping = self._maps.get(resource, {})
        if not all(kubelet_id in mapping for kubelet_id in kubelet_ids):
            return None
        return tuple(mapping[kubelet_id] for kubelet_id in kubelet_ids)

    def paired(self, resource: str, devices: Sequence[OfferedDevice]) -> list[tuple[str, OfferedDevice]]:
        """Every device's ID as a kubelet ID, with the real device whose health ListAndWatch reports for it.

        The unmapped IDs take the unmapped real devices in order: a faulted chip turns unhealthy the ID of
        the pod holding it, and the count of healthy IDs stays that of healthy chips.
        """
        by_id = {device.id: device for device in devices}
        mapping = {k: r for k, r in self._maps.get(resource, {}).items() if k in by_id and r in by_id}
        mapped_reals = set(mapping.values())
        free_ids = [device.id for device in devices if device.id not in mapping]
        free_reals = [device for device in devices if device.id not in mapped_reals]
        pairs = {kubelet_id: by_id[real] for kubelet_id, real in mapping.items()}
        pairs.update(zip(free_ids, free_reals, strict=True))
        return [(device.id, pairs[device.id]) for device in devices]


class DeviceChooser(Protocol):
    """Names the real devices for an Allocate of a resource whose chips a scheduler chose (Volcano)."""

    assignments: Assignments  # the kubelet ID -> real device maps it keeps

    def decides(self, resource: str) -> bool:
        """True when this chooser, not the kubelet, decides the devices of ``resource``."""

    async def choose(self, resource: str, kubelet_ids: Sequence[str]) -> tuple[str, ...]:
        """The real device IDs to hand over for ``kubelet_ids``; CannotServe says why there are none."""


@dataclass(frozen=True)
class HeldDevice:
    """A device a container holds, and the chips behind it."""

    resource: str  # the extended resource, or the DRA driver's name
    id: str  # the real device ID (the chooser's choice in Volcano mode), or the claim's device name
    chips: tuple[int, ...]  # physical ids
    vnpu: int | None = None  # the vNPU's id, when the device is one


@dataclass(frozen=True)
class ClaimNames:
    """How this node's DRA driver names its devices: driver, pool, and a device name's chip."""

    driver: str
    pool: str
    phy_of: Callable[[str], int | None]


@dataclass(frozen=True)
class DevicePluginIds:
    """The chips behind a device plugin's IDs (Huawei's and ours), read from the IDs (Volcano's name none:
    docs/dra.md)."""

    resource: str  # the family's whole-chip resource, e.g. huawei.com/Ascend910
    prefix: str  # its device ID prefix, e.g. Ascend910
    chips: Collection[int]  # the node's physical ids: an ID naming another is no chip of ours

    def chip_of(self, resource: str, device_id: str) -> int | None:
        """The physical id a device ID names, or None when it is none of this node's chips."""
        prefix = re.escape(self.prefix)
        if resource == self.resource:
            match = re.fullmatch(rf"{prefix}-(\d+)(?:-\d+)?", device_id)
        elif resource.startswith(self.resource + "-"):
            match = re.fullmatch(rf"{prefix}-.+-\d+-(\d+)", device_id)
        else:
            return None
        phy = int(match.group(1)) if match else None
        return phy if phy in self.chips else None


class ChipResolver:
    """Names the chips behind kubelet device IDs and claims' devices; ``chooser`` is set once Volcano's
    face is built."""

    def __init__(
        self,
        book: OfferBook | None = None,
        claims: ClaimNames | None = None,
        plugin_ids: DevicePluginIds | None = None,
    ) -> None:
        self.book = book
        self.claims = claims
        self.plugin_ids = plugin_ids
        self.chooser: DeviceChooser | None = None

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever an answer may: the offer book's (inventory) version, the chooser's map version."""
        book = self.book.version if self.book is not None else 0
        chooser = self.chooser.assignments.changes.version if self.chooser is not None else 0
        return (book, chooser)

    def device(self, resource: str, kubelet_id: str) -> HeldDevice | None:
        """The device behind a kubelet device ID of ``resource``; None when it is not one of ours (yet)."""
        if self.book is None:
            phy = self.plugin_ids.chip_of(resource, kubelet_id) if self.plugin_ids is not None else None
            return HeldDevice(resource, kubelet_id, (phy,)) if phy is not None else None
        real = kubelet_id
        if self.chooser is not None and self.chooser.decides(resource):
            mapped = self.chooser.assignments.real_of(resource, [kubelet_id])
            if mapped is None:
                return None
            real = mapped[0]
        offered = self.book.get(resource, real)
        if offered is None:
            return None
        vnpu = int(offered.visible) if offered.virtual and offered.visible.isdigit() else None
        return HeldDevice(resource, real, offered.chips, vnpu)

    def claim_device(self, claim: ClaimDevice) -> HeldDevice | None:
        """The chip behind a DRA claim's device; None for another driver's, another pool's, or a stranger."""
        names = self.claims
        if names is None or claim.driver != names.driver or claim.pool != names.pool:
            return None
        phy = names.phy_of(claim.device)
        return HeldDevice(claim.driver, claim.device, (phy,)) if phy is not None else None
