"""Assignments: which real chips stand behind the kubelet's device IDs when a scheduler chose them.

Normally the kubelet's device IDs are the devices: Allocate hands over exactly
what the kubelet names. Under a scheduler that picks chips itself (Volcano with
Huawei's ascend-for-volcano plugin), the kubelet's IDs are only a count, and the
scheduler's choice, written on the pod, is what the container gets. The
device-plugin face and the Kubernetes face both depend on what follows from
that, and neither may import the other (nor the Volcano face), so it lives here:

* :class:`Assignments`: per resource, kubelet device ID -> the real device
  handed over for it. ListAndWatch reports every kubelet ID with the health of
  exactly one real device (:meth:`Assignments.paired`): a faulted chip turns
  the kubelet ID of the pod holding it unhealthy, never another pod's, and the
  kubelet's count of healthy IDs stays the count of healthy chips;
* :class:`HeldChips`: the physical chips the node's containers hold, which the
  device-info ConfigMap leaves out of its free list (Volcano mode), fault
  management and hot reset read;
* :class:`DeviceChooser`: what the device-plugin face asks in Allocate for a
  resource whose chips someone else chooses; a refusal is a
  :class:`~ascend_plugin.grpc_guard.refusals.CannotServe`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Final, Protocol

from ascend_plugin.changes import Changes
from ascend_plugin.offers.base import OfferedDevice

# Seconds the kubelet may take to list a container's devices once their Allocate returned: a listing
# begun this long after a hand-over says whether the container holds them (or never started).
HANDED_SETTLE: Final = 1.0


class Assignments:
    """Per resource, the real device handed over for each kubelet device ID.

    The map stays one to one: recording a pair drops every earlier pair that
    used the same kubelet ID or the same real device. Pairs of pods that ended
    stay until a new allocation replaces them; they are harmless, since every
    kubelet ID stands for exactly one real device either way.
    """

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, str]] = {}
        self._changes = Changes()

    @property
    def version(self) -> int:
        """Increases on every change of any map."""
        return self._changes.version

    async def wait_for_change(self, seen_version: int) -> int:
        """Return the version once it differs from ``seen_version``."""
        return await self._changes.wait_for_change(seen_version)

    def mapping(self, resource: str) -> Mapping[str, str]:
        """Kubelet ID -> real device ID of one resource."""
        return MappingProxyType(dict(self._maps.get(resource, {})))

    def record(self, resource: str, kubelet_ids: Sequence[str], real_ids: Sequence[str]) -> None:
        """``kubelet_ids[i]`` now stands for ``real_ids[i]``."""
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
            self._changes.bump()

    def real_of(self, resource: str, kubelet_ids: Sequence[str]) -> tuple[str, ...] | None:
        """The real devices behind ``kubelet_ids``, or None if any of them is not mapped."""
        mapping = self._maps.get(resource, {})
        if not all(kubelet_id in mapping for kubelet_id in kubelet_ids):
            return None
        return tuple(mapping[kubelet_id] for kubelet_id in kubelet_ids)

    def paired(self, resource: str, devices: Sequence[OfferedDevice]) -> list[tuple[str, OfferedDevice]]:
        """Every device's ID as a kubelet ID, with the real device whose health it reports.

        Mapped IDs report their real device; the rest are paired, in order, with
        the real devices nobody's ID maps to. Pairs naming a device the node no
        longer offers are ignored.
        """
        by_id = {device.id: device for device in devices}
        mapping = {k: r for k, r in self._maps.get(resource, {}).items() if k in by_id and r in by_id}
        mapped_reals = set(mapping.values())
        free_ids = [device.id for device in devices if device.id not in mapping]
        free_reals = [device for device in devices if device.id not in mapped_reals]
        pairs = {kubelet_id: by_id[real] for kubelet_id, real in mapping.items()}
        pairs.update(zip(free_ids, free_reals, strict=True))
        return [(device.id, pairs[device.id]) for device in devices]


class HeldChips:
    """The physical ids of the chips this node's containers hold (filled by :mod:`ascend_plugin.holdings`).

    :attr:`known` is False until the first answer: before it, an empty set
    says nothing about whether a chip is free. The kubelet lists a container's
    devices only once its Allocate returned, and the plugin reads that list
    every few seconds: so the chips Allocate (or a DRA Prepare) just handed over
    (:meth:`handed`) count as held too, until a listing begun after shows
    them held, or one begun :data:`HANDED_SETTLE` seconds after does not.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._chips: frozenset[int] = frozenset()
        self._listed: frozenset[int] = frozenset()
        self._handed: dict[int, float] = {}  # chip -> when it was handed over, not yet seen listed
        self._known = False
        self._changes = Changes()

    @property
    def chips(self) -> frozenset[int]:
        return self._chips

    @property
    def handed_out(self) -> frozenset[int]:
        """Chips handed over lately that no listing has covered yet (held whatever the kubelet lists)."""
        return frozenset(self._handed)

    @property
    def known(self) -> bool:
        """Whether the held chips were learnt at least once (from the kubelet, or Volcano's annotations)."""
        return self._known

    @property
    def version(self) -> int:
        """Increases whenever the held chips change."""
        return self._changes.version

    def set(self, chips: frozenset[int], listed_at: float | None = None) -> None:
        """The chips held now, from a listing begun at ``listed_at`` (this clock) if it is one."""
        if listed_at is not None:  # what the kubelet lists held, or has had time to, is its to say now
            self._handed = {
                chip: at
                for chip, at in self._handed.items()
                if listed_at < at + HANDED_SETTLE and not (chip in chips and listed_at >= at)
            }
        self._listed = chips
        self._update(known=True)

    def handed(self, chips: Iterable[int]) -> None:
        """These chips were just handed to a container: held from now on, before the kubelet lists them."""
        now = self.clock()
        for chip in chips:
            self._handed[chip] = now
        self._update(known=self._known)

    def _update(self, *, known: bool) -> None:
        chips = self._listed | self._handed.keys()
        if chips != self._chips or known != self._known:
            self._chips, self._known = chips, known
            self._changes.bump()

    async def wait_for_change(self, seen_version: int) -> int:
        """Return the version once it differs from ``seen_version``."""
        return await self._changes.wait_for_change(seen_version)


class DeviceChooser(Protocol):
    """Names the real devices for an Allocate of a resource whose chips a scheduler chose."""

    @property
    def assignments(self) -> Assignments:
        """The kubelet ID -> real device maps the chooser keeps."""
        ...

    def decides(self, resource: str) -> bool:
        """True when this chooser, not the kubelet, decides the devices of ``resource``."""
        ...

    async def choose(self, resource: str, kubelet_ids: Sequence[str]) -> tuple[str, ...]:
        """The real device IDs to hand over for ``kubelet_ids``; CannotServe says why there are none."""
        ...
