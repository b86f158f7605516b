"""PodHoldings: per container, the chips it holds; refreshed on a cadence and on demand; HeldChips filled.

The kubelet is asked every :data:`REFRESH_INTERVAL` seconds, and whenever a
part asks for a listing newer than its question (:meth:`PodHoldings.refresh`):
one call to the kubelet serves every part that asked while it was under way.
Each listing is resolved to chips (:mod:`.resolve`) and the result kept until
the next; it is resolved again when the offer book or the chooser's map changes
(a vNPU appeared, Volcano's map was rebuilt), at the next read.

:class:`~ascend_plugin.offers.assignments.HeldChips` is set from every listing
that the kubelet answered, in every mode, with the chips a part knows to be
held beyond the kubelet's record (:meth:`PodHoldings.also_held`: Volcano mode,
from the pods' annotations and its own Allocates). While the kubelet cannot be
asked, the held chips are that part's alone, or, where no part knows, stay as
last known. The chips held through device-plugin IDs (not DRA claims) are kept
apart, with a change count: a DRA driver publishes none of them while a pod a
device plugin served still holds it (:meth:`PodHoldings.device_plugin_holders`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.holdings.pod_resources import ContainerRef, Listing, PodResourcesClient
from ascend_plugin.holdings.resolve import ChipResolver, HeldDevice
from ascend_plugin.offers.assignments import HeldChips

log = logging.getLogger(__name__)

REFRESH_INTERVAL = 5.0  # seconds between two listings when nobody asks sooner (npu-exporter's cadence)


@dataclass(frozen=True)
class ContainerChips:
    """One container and what it holds of this node's devices (only containers that hold any are kept)."""

    ref: ContainerRef
    devices: tuple[HeldDevice, ...]

    @property
    def chips(self) -> frozenset[int]:
        """The physical ids of every chip behind its devices."""
        return frozenset(chip for device in self.devices for chip in device.chips)


@dataclass(frozen=True)
class Resolved:
    """A listing resolved to chips: per container, per chip its containers, and those through device IDs."""

    containers: tuple[ContainerChips, ...] = ()
    by_chip: Mapping[int, tuple[ContainerRef, ...]] = field(default_factory=lambda: MappingProxyType({}))
    # Per chip, the containers holding it through a device plugin's device IDs (not a DRA claim).
    plugin_held: Mapping[int, tuple[ContainerRef, ...]] = field(default_factory=lambda: MappingProxyType({}))

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
        if not devices:
            continue
        held = ContainerChips(entry.ref, tuple(devices))
        containers.append(held)
        for chip in sorted(held.chips):
            by_chip.setdefault(chip, []).append(entry.ref)
    return Resolved(
        tuple(sorted(containers, key=lambda held: held.ref)),
        _by_chip(by_chip),
        _by_chip(plugin_held),
    )


def _by_chip(refs: Mapping[int, list[ContainerRef]]) -> Mapping[int, tuple[ContainerRef, ...]]:
    return MappingProxyType({chip: tuple(sorted(found)) for chip, found in sorted(refs.items())})


class PodHoldings:
    """The kubelet's view of which container holds which chips, kept current."""

    def __init__(
        self,
        client: PodResourcesClient,
        resolver: ChipResolver,
        held: HeldChips,
        *,
        interval: float = REFRESH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.resolver = resolver
        self.held = held
        self.interval = interval
        self.clock = clock
        self.listing: Listing | None = None  # the last listing the kubelet answered
        self.answered = False  # whether the last attempt was answered
        self._listed_at = -float("inf")  # clock() when the last attempt began
        self._lock = anyio.Lock()
        self._resolved = Resolved()
        self._resolved_for: tuple[int, tuple[int, int]] | None = None
        self._generation = 0  # counts listings, so a new one is always resolved
        self._also: frozenset[int] | None = None  # what a part knows to be held (Volcano mode)
        self.tried = anyio.Event()  # set once the kubelet was asked the first time, answered or not
        self.changes = Changes()  # bumped when the chips held through device-plugin IDs change
        self._plugin_held: Mapping[int, tuple[ContainerRef, ...]] = MappingProxyType({})

    # -- what parts read ---------------------------------------------------------------

    def containers(self) -> tuple[ContainerChips, ...]:
        """Every container holding chips of this node, by (namespace, pod, container)."""
        return self._current().containers

    def holders(self, phy_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding chip ``phy_id`` (its whole, a share or a vNPU of it), sorted."""
        return self._current().by_chip.get(phy_id, ())

    def device_plugin_holders(self) -> Mapping[int, tuple[ContainerRef, ...]]:
        """Per chip, the containers holding it through a device plugin's device IDs (no DRA claim)."""
        return self._current().plugin_held

    # -- keeping it current ------------------------------------------------------------

    async def run(self) -> None:
        """List every ``interval`` seconds (sooner listings on demand count) until cancelled."""
        while True:
            await anyio.sleep(max(self._listed_at + self.interval - self.clock(), 0.0))
            if self._listed_at + self.interval <= self.clock():
                await self.refresh()

    async def refresh(self) -> Listing | None:
        """A listing begun after this call, or None when the kubelet cannot be asked now.

        Callers that ask while a listing is under way wait for the one after it
        (the one under way may have begun before what they want to see); all of
        them share that one.
        """
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
            self.update_held(began if listing is not None else None)
            plugin_held = self.device_plugin_holders()
            if plugin_held != self._plugin_held:
                self._plugin_held = plugin_held
                self.changes.bump()
            self.tried.set()
            return listing

    def also_held(self, chips: frozenset[int]) -> None:
        """Chips a part knows to be held beyond the kubelet's record (replacing what it said before)."""
        self._also = chips
        self.update_held()

    def update_held(self, listed_at: float | None = None) -> None:
        """Set HeldChips: the last listing's chips and the parts' own; theirs alone without the kubelet.

        ``listed_at``: when the listing just answered began (what it covers of the chips handed over lately).
        """
        also = self._also or frozenset()
        if self.answered:
            self.held.set(self._current().chips | also, listed_at)
        elif self._also is not None:
            self.held.set(also)

    def _current(self) -> Resolved:
        if self.listing is None:
            return self._resolved
        key = (self._generation, self.resolver.version)
        if key != self._resolved_for:
            self._resolved = resolve(self.listing, self.resolver)
            self._resolved_for = key
        return self._resolved
