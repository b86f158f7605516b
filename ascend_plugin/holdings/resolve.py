"""From what the kubelet lists to the chips behind it: device-plugin IDs and DRA claims' devices.

A device-plugin ID is one of the offer book's devices: a whole chip, a share of
one, or a vNPU carved out of one; each names its chips (and a vNPU its id). For
a resource whose chips a scheduler chooses (Volcano mode), the kubelet's IDs are
only a count: the chip behind one is the chooser's kubelet-ID map
(:class:`~ascend_plugin.offers.assignments.Assignments`), and an ID the map
does not know names no chip yet. A DRA claim's device is this driver's, in this
node's pool, named after the chip it is or sits on (the DRA face says how: a
whole chip, or a partition made on demand). With the DRA driver there is no
offer book, yet pods a device plugin served before the node moved (this one's,
or Huawei's: the same IDs) still hold their chips: their IDs are read by the
names a device plugin gives them (:class:`DevicePluginIds`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ascend_plugin.holdings.pod_resources import ClaimDevice
from ascend_plugin.offers.assignments import DeviceChooser
from ascend_plugin.offers.book import OfferBook


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
    """The chips behind a device plugin's IDs, read from the IDs themselves (no offer book).

    Huawei's names and this plugin's alike: ``<prefix>-<phy>`` (a whole chip),
    ``<prefix>-<phy>-<i>`` (a share) of the family's resource, and
    ``<prefix>-<template suffix>-<vNPU id>-<phy>`` of a vNPU resource
    ``<resource>-<suffix>``. Volcano's kubelet IDs do not name the chip Volcano
    chose: a node that ran Volcano mode is drained before it moves (docs/dra.md).
    """

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
    """Names the chips behind kubelet device IDs (through the offer book) and claims' devices.

    ``chooser`` is the Volcano chooser once that face exists (it is built after
    this resolver, which it needs): set it then. Without a book (the DRA driver),
    ``plugin_ids`` reads the chips of device-plugin pods from their IDs.
    """

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
        chooser = self.chooser.assignments.version if self.chooser is not None else 0
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
