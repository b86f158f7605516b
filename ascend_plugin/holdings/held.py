"""Who holds which chip of this node, in every mode: :class:`HeldChips`, and how what the kubelet lists
names chips.

The kubelet's listing (every :data:`REFRESH_INTERVAL` s, and on demand) is resolved to chips by
:class:`ChipResolver`: device-plugin IDs are the offer book's devices, or in Volcano mode only a count
(:class:`Assignments` says which chip each stands for); without a book (the DRA driver) a device plugin's
IDs are read by their names (:class:`DevicePluginIds`); DRA claims' devices by the driver's names. What the
kubelet cannot list yet counts too: the chips Allocate or Prepare just handed over and, in Volcano mode,
what the pods' annotations say. ARCHITECTURE.md "Who holds a chip".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol

import anyio

from ascend_plugin.changes import Changes, Followable
from ascend_plugin.holdings.pod_resources import ClaimDevice, ContainerRef, Listing, PodResourcesClient
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.book import OfferBook

REFRESH_INTERVAL: Final = 5.0  # seconds between two listings when nobody asks sooner (npu-exporter's cadence)
# Seconds the kubelet may take to list a container's devices once their Allocate returned: a listing
# begun this long after a hand-over says whether the container holds them (or never started).
HANDED_SETTLE: Final = 1.0

ByChip = Mapping[int, tuple[ContainerRef, ...]]
PodIds = Mapping[tuple[str, str], tuple[str, ...]]  # (namespace, pod) -> device IDs


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
        """Every device's ID as a kubelet ID, with the real device whose health ListAndWatch reports for
        it. The unmapped IDs take the unmapped real devices in order: a faulted chip turns unhealthy the ID
        of the pod holding it, and the count of healthy IDs stays that of healthy chips."""
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


@dataclass(frozen=True)
class ContainerChips:
    """One container and what it holds of this node's devices (only containers that hold any are kept)."""

    ref: ContainerRef
    devices: tuple[HeldDevice, ...]

    @property
    def chips(self) -> frozenset[int]:
        return frozenset(chip for device in self.devices for chip in device.chips)


@dataclass(frozen=True)
class Resolved:
    """A listing resolved: per container, per chip its containers, and those holding it through device IDs."""

    containers: tuple[ContainerChips, ...] = ()
    by_chip: ByChip = field(default_factory=lambda: MappingProxyType({}))
    plugin_held: ByChip = field(default_factory=lambda: MappingProxyType({}))  # device IDs, not DRA claims

    @property
    def chips(self) -> frozenset[int]:
        return frozenset(self.by_chip)


def resolve(listing: Listing, resolver: ChipResolver) -> Resolved:
    """Each container's devices as chips; containers holding none of ours are left out."""
    containers = []
    by_chip: dict[int, list[ContainerRef]] = {}
    plugin_held: dict[int, list[ContainerRef]] = {}
    for entry in listing:
        devices = [
            device
            for resource, ids in entry.devices.items()
            for kubelet_id in ids
            if (device := resolver.device(resource, kubelet_id)) is not None
        ]
        for chip in sorted({chip for device in devices for chip in device.chips}):
            plugin_held.setdefault(chip, []).append(entry.ref)
        devices += [device for claim in entry.claims if (device := resolver.claim_device(claim)) is not None]
        if devices:
            held = ContainerChips(entry.ref, tuple(devices))
            containers.append(held)
            for chip in sorted(held.chips):
                by_chip.setdefault(chip, []).append(entry.ref)
    return Resolved(
        tuple(sorted(containers, key=lambda held: held.ref)), _by_chip(by_chip), _by_chip(plugin_held)
    )


def _by_chip(refs: Mapping[int, list[ContainerRef]]) -> ByChip:
    return MappingProxyType({chip: tuple(sorted(found)) for chip, found in sorted(refs.items())})


class HeldChips(Followable):
    """Which container holds which chips, kept current, and the node's held chips (not :attr:`known` before
    the first answer: an empty set then says nothing); while the kubelet does not answer they stay as last
    known, or are what :meth:`also_held` says."""

    def __init__(
        self,
        client: PodResourcesClient,
        resolver: ChipResolver | None = None,
        *,
        interval: float = REFRESH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()  # version and wait_for_change: the held chips, their being known, the holders
        self.client = client
        self.resolver = resolver or ChipResolver()  # the mode's: set by the app once the offers are known
        self.interval = interval
        self.clock = clock
        self.listing: Listing | None = None  # the last listing the kubelet answered
        self.answered = False  # whether the last attempt was answered
        self.tried = anyio.Event()  # set once the kubelet was asked the first time, answered or not
        self._listed_at = -float("inf")  # clock() when the last attempt began
        self._lock = anyio.Lock()
        self._resolved = Resolved()
        self._resolved_for: tuple[int, tuple[int, int]] | None = None
        self._generation = 0  # counts listings, so a new one is always resolved
        self._also: frozenset[int] | None = None  # what a part knows to be held (Volcano mode)
        self._listed: frozenset[int] = frozenset()  # held by the last answer (the kubelet's, or a part's)
        self._handed: dict[int, float] = {}  # chip -> when it was handed over, not yet seen listed
        self.chips: frozenset[int] = frozenset()  # the chips containers hold, or were just handed
        self.known = False  # learnt at least once (from the kubelet, or Volcano's annotations)
        self._plugin_held: ByChip = MappingProxyType({})

    # -- the held chips (the device-info free list, fault management, hot reset) ---------------

    @property
    def just_handed(self) -> frozenset[int]:
        """Chips handed over lately that no listing has covered yet (held whatever the kubelet lists)."""
        return frozenset(self._handed)

    # -- per container (telemetry labels, Volcano, the DRA slices) ----------------------------

    def containers(self) -> tuple[ContainerChips, ...]:
        """Every container holding chips of this node, by (namespace, pod, container)."""
        return self._current().containers

    def holders(self, phy_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding chip ``phy_id`` (its whole, a share or a vNPU of it), sorted."""
        return self._current().by_chip.get(phy_id, ())

    def device_plugin_holders(self) -> ByChip:
        """Per chip, the containers holding it through a device plugin's device IDs (no DRA claim)."""
        return self._current().plugin_held

    def device_ids(self, resource: str) -> PodIds:
        """Per pod (namespace, name), the kubelet's device IDs of ``resource`` in its last answer."""
        found: dict[tuple[str, str], tuple[str, ...]] = {}
        for entry in self.listing or ():
            if ids := entry.devices.get(resource):
                found[entry.ref.pod_key] = (*found.get(entry.ref.pod_key, ()), *ids)
        return MappingProxyType(found)

    # -- what the faces tell --------------------------------------------------------------------

    def handed(self, chips: Iterable[int]) -> None:
        """These chips were just handed over: held until a listing begun after shows them, or one begun
        :data:`HANDED_SETTLE` s after does not."""
        now = self.clock()
        for chip in chips:
            self._handed[chip] = now
        self._publish()

    def also_held(self, chips: frozenset[int]) -> None:
        """Chips a part knows to be held beyond the kubelet's record (replacing what it said before)."""
        self._also = chips
        self._learn(None)

    # -- keeping it current --------------------------------------------------------------------

    async def run(self) -> None:
        """List every ``interval`` seconds (sooner listings on demand count) until cancelled."""
        while True:
            await anyio.sleep(max(self._listed_at + self.interval - self.clock(), 0.0))
            if self._listed_at + self.interval <= self.clock():
                await self.refresh()

    async def refresh(self) -> Listing | None:
        """A listing begun after this call (the one under way may be older), or None when the kubelet cannot
        be asked."""
        asked = self.clock()
        async with self._lock:
            if self._listed_at >= asked:
                return self.listing if self.answered else None
            began = self._listed_at = self.clock()
            listing = await self.client.listing()
            self.answered = listing is not None
            if listing is not None:
                self.listing = listing
                self._generation += 1
            self._learn(began if listing is not None else None, self._current().plugin_held)
            self.tried.set()
            return listing

    def _learn(self, listed_at: float | None, plugin_held: ByChip | None = None) -> None:
        """The last listing's chips and the parts' own, theirs alone without the kubelet; ``listed_at``: when
        it began."""
        listed = None
        if self.answered:
            listed = self._current().chips | (self._also or frozenset())
        elif self._also is not None:
            listed = self._also
        if listed is not None:
            if listed_at is not None:  # what the kubelet lists held, or has had time to, is its to say now
                self._handed = {
                    chip: at
                    for chip, at in self._handed.items()
                    if listed_at < at + HANDED_SETTLE and not (chip in listed and listed_at >= at)
                }
            self._listed = listed
        self._publish(known=self.known or listed is not None, plugin_held=plugin_held)

    def _publish(self, *, known: bool | None = None, plugin_held: ByChip | None = None) -> None:
        """Bump the version when the held chips, their being known, or the device-plugin holders changed."""
        chips = self._listed | self._handed.keys()
        known = self.known if known is None else known
        plugin_held = self._plugin_held if plugin_held is None else plugin_held
        if (chips, known, plugin_held) != (self.chips, self.known, self._plugin_held):
            self.chips, self.known, self._plugin_held = chips, known, plugin_held
            self._changes.bump()

    def _current(self) -> Resolved:
        if self.listing is None:
            return self._resolved
        key = (self._generation, self.resolver.version)
        if key != self._resolved_for:
            self._resolved = resolve(self.listing, self.resolver)
            self._resolved_for = key
        return self._resolved
