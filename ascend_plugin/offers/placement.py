"""GetPreferredAllocation from the chips' topology: which available devices a container should get.

A request stays inside as few topology units as it can and leaves the node as whole as it can; the rules
are data (:data:`PLACEMENT_RULES`, docs/configuration.md "Placement rules"), read by one algorithm level
by level. It never raises: the kubelet fails admission on any error, and its view lags ours, so a bad
request gets the best valid answer and one warning line.
"""

from __future__ import annotations

import collections
import enum
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ascend_plugin.grpc_guard.status import listed
from backends.topology import TopologyUnit, UnitKind

log = logging.getLogger(__name__)

_LISTED = 10  # device IDs named in one log line


@dataclass(frozen=True)
class DevicePlace:
    """One offered device and where it sits: its chip, the chip's unit, its NUMA node if known."""

    id: str
    phy_id: int
    unit: TopologyUnit
    numa_node: int | None = None


class Spread(enum.Enum):
    """How a request that fits in no single unit is split over units."""

    CONSOLIDATE = "consolidate"  # whole free units first, fewest units
    EVEN = "even"  # fewest units, counts as even as possible


@dataclass(frozen=True)
class UnitRules:
    """How requests are placed on units of one kind."""

    spread: Spread
    # unit size -> request size -> free counts of a unit to take the request from, best first
    fit_order: Mapping[int, Mapping[int, tuple[int, ...]]]

    def rank(self, unit_size: int, request: int, free: int) -> int:
        """Lower is better: the place of ``free`` in the order for this unit and request size."""
        order = self.fit_order.get(unit_size, {}).get(request)
        if order is None or free not in order:
            return best_fit(request, free)
        return order.index(free)


def best_fit(request: int, free: int) -> int:
    """The default rank: the fewer free left over, the better."""
    return free - request


def _orders(rows: Mapping[int, Mapping[int, tuple[int, ...]]]) -> Mapping[int, Mapping[int, tuple[int, ...]]]:
    return MappingProxyType({size: MappingProxyType(dict(row)) for size, row in rows.items()})


PLACEMENT_RULES: Mapping[UnitKind, UnitRules] = MappingProxyType(
    {
        UnitKind.RING: UnitRules(
            Spread.CONSOLIDATE, _orders({4: {1: (1, 3, 2, 4), 2: (2, 4, 3), 3: (3, 4), 4: (4,)}})
        ),
        UnitKind.CARD: UnitRules(
            Spread.CONSOLIDATE,
            _orders({4: {1: (1, 3, 2, 4), 2: (2, 3, 4), 3: (3, 4), 4: (4,)}, 2: {1: (1, 2), 2: (2,)}}),
        ),
        UnitKind.MESH: UnitRules(Spread.EVEN, _orders({})),
    }
)

# The levels below the units: NUMA nodes and chips, packed by best fit.
_PACKED = UnitRules(Spread.CONSOLIDATE, _orders({}))


def numa_ids(numa_node: int | None) -> list[int]:
    """The NUMA node IDs for ``Device.topology`` of ListAndWatch: empty when unknown (None or negative)."""
    return [numa_node] if numa_node is not None and numa_node >= 0 else []


@dataclass(frozen=True)
class _Entry:
    order: int  # position among the offered devices: the tie-break of last resort
    place: DevicePlace
    numa: int | None


class _Bin:
    """A group of available devices one level of the algorithm chooses between."""

    __slots__ = ("entries", "free", "key", "must", "numa", "rank", "rules")

    def __init__(
        self,
        key: tuple[str | int, ...],
        entries: list[_Entry],
        must: set[str],
        rules: UnitRules,
        rank: Callable[[int, int], int],
    ) -> None:
        self.key = key
        self.entries = entries
        self.free = len(entries)
        self.must = sum(entry.place.id in must for entry in entries)
        self.numa = frozenset(entry.numa for entry in entries)
        self.rules = rules
        self.rank = rank  # (request, free) -> rank


class _Numa:
    """Which NUMA nodes the answer uses so far, and how many free devices each node has."""

    def __init__(self, used: Iterable[int | None], bins: Sequence[_Bin]) -> None:
        self.used = set(used)
        self.free = collections.Counter(entry.numa for b in bins for entry in b.entries)

    def key(self, candidate: _Bin, need: int) -> tuple[bool, bool]:
        return (not (candidate.numa & self.used), not any(self.free[node] >= need for node in candidate.numa))


def _split(need: int, bins: Sequence[_Bin], spread: Spread, numa: _Numa) -> list[int]:
    """How many devices to take from each bin: ``need`` in all (never above their free total), each at
    least its must-include count."""
    counts = [b.must for b in bins]
    left = need - sum(counts)
    opened = [i for i, b in enumerate(bins) if b.must]
    rest = [i for i, b in enumerate(bins) if not b.must]
    for i in opened:
        numa.used |= bins[i].numa

    def pick(candidates: list[int], fit: bool) -> int:
        if fit:
            chosen = min(
                candidates,
                key=lambda i: (bins[i].rank(left, bins[i].free), numa.key(bins[i], left), bins[i].key),
            )
        else:
            chosen = min(candidates, key=lambda i: (-bins[i].free, numa.key(bins[i], left), bins[i].key))
        rest.remove(chosen)
        numa.used |= bins[chosen].numa
        return chosen

    if spread is Spread.CONSOLIDATE:
        for i in sorted(opened, key=lambda i: (-bins[i].must, bins[i].key)):
            extra = min(bins[i].free - bins[i].must, left)
            counts[i] += extra
            left -= extra
        while left > 0:
            fitting = [i for i in rest if bins[i].free >= left]
            i = pick(fitting or rest, fit=bool(fitting))
            take = min(bins[i].free, left)
            counts[i] += take
            left -= take
        return counts

    used = list(opened)
    room = sum(bins[i].free - bins[i].must for i in used)
    if not used and left > 0:
        fitting = [i for i in rest if bins[i].free >= left]
        if fitting:
            counts[pick(fitting, fit=True)] = left
            return counts
    while room < left:
        i = pick(rest, fit=False)
        used.append(i)
        room += bins[i].free
    for _ in range(left):
        i = min(
            (i for i in used if counts[i] < bins[i].free),
            key=lambda i: (counts[i], bins[i].free - counts[i], bins[i].key),
        )
        counts[i] += 1
    return counts


class NodeTopology:
    """The offered devices of one resource, built once per change of them; :meth:`preferred` is pure."""

    def __init__(self, devices: Iterable[DevicePlace], rules: Mapping[UnitKind, UnitRules] = PLACEMENT_RULES):
        self._rules = rules
        self._entries: dict[str, _Entry] = {}
        for order, place in enumerate(devices):
            if place.id in self._entries:
                raise ValueError(f"device ID {place.id!r} is offered twice; device IDs must be unique")
            numa = place.numa_node if place.numa_node is not None and place.numa_node >= 0 else None
            self._entries[place.id] = _Entry(order, place, numa)
        per_unit: dict[TopologyUnit, list[_Entry]] = collections.defaultdict(list)
        for entry in self._entries.values():
            per_unit[entry.place.unit].append(entry)
        # Where every chip of a unit is offered as one device, the table (written for
        # whole chips) applies; with shares or vNPUs the unit takes best fit.
        self._whole_chips = {
            unit: len({entry.place.phy_id for entry in entries}) == len(entries)
            for unit, entries in per_unit.items()
        }

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """The devices to prefer for one container: see the module docstring for the rules."""
        free, must = self._checked(available, must_include, size)
        target = max(len(must), min(size, len(free)))
        if target >= len(free):
            return [entry.place.id for entry in free]
        if target == len(must):
            return [entry.place.id for entry in free if entry.place.id in must]
        chosen: list[_Entry] = []
        used_numa = {entry.numa for entry in free if entry.place.id in must}
        grouped: dict[TopologyUnit, list[_Entry]] = collections.defaultdict(list)
        for entry in free:
            grouped[entry.place.unit].append(entry)
        units = []
        for where, entries in grouped.items():
            rules = self._rules.get(where.kind, _PACKED)
            rank = functools.partial(rules.rank, where.size) if self._whole_chips[where] else best_fit
            units.append(_Bin((where.kind.value, where.index, where.size), entries, must, rules, rank))
        units.sort(key=lambda b: b.key)
        # A node mixing unit kinds (no real server does) falls back to consolidation.
        spread = Spread.EVEN if all(b.rules.spread is Spread.EVEN for b in units) else Spread.CONSOLIDATE
        for unit, count in zip(units, _split(target, units, spread, _Numa(used_numa, units)), strict=True):
            if count:
                chosen += self._take_from_unit(unit, count, must, used_numa | {e.numa for e in chosen})
        return [entry.place.id for entry in sorted(chosen, key=lambda entry: entry.order)]

    def _checked(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> tuple[list[_Entry], set[str]]:
        """The known available devices in offered order, and the must-include IDs among them."""
        unknown = [
            device_id
            for device_id in dict.fromkeys([*available, *must_include])
            if device_id not in self._entries
        ]
        if unknown:
            log.warning(
                "preferred allocation: ignoring device IDs not offered on this node: %s",
                listed(unknown, _LISTED),
                extra={"devices": unknown[:_LISTED], "unknown": len(unknown)},
            )
        offered = set(available) - set(unknown)
        free = sorted((self._entries[device_id] for device_id in offered), key=lambda entry: entry.order)
        wanted = [device_id for device_id in dict.fromkeys(must_include) if device_id in self._entries]
        missing = [device_id for device_id in wanted if device_id not in offered]
        if missing:
            log.warning(
                "preferred allocation: must-include devices are not available, left out: %s",
                listed(missing, _LISTED),
                extra={"devices": missing[:_LISTED], "unavailable": len(missing)},
            )
        must = {device_id for device_id in wanted if device_id in offered}
        if size <= 0:
            log.warning(
                "preferred allocation: allocation size %d is not positive; answering the must-include IDs",
                size,
                extra={"allocation_size": size},
            )
        elif len(must) > size:
            log.warning(
                "preferred allocation: %d must-include devices for an allocation of %d; answering them all",
                len(must),
                size,
                extra={"must_include": len(must), "allocation_size": size},
            )
        elif size > len(free):
            log.warning(
                "preferred allocation: %d devices asked for, %d available; answering every available one",
                size,
                len(free),
                extra={"available": len(free), "allocation_size": size},
            )
        return free, must

    def _take_from_unit(
        self, unit: _Bin, count: int, must: set[str], used_numa: set[int | None]
    ) -> list[_Entry]:
        """``count`` devices of a unit: NUMA nodes by best fit, then chips by best fit."""
        chosen: list[_Entry] = []
        nodes = _packed_bins(
            unit.entries, must, lambda entry: (1, 0) if entry.numa is None else (0, entry.numa)
        )
        node_counts = _split(count, nodes, Spread.CONSOLIDATE, _Numa(used_numa, nodes))
        for node, node_count in zip(nodes, node_counts, strict=True):
            if not node_count:
                continue
            chips = _packed_bins(node.entries, must, lambda entry: (entry.place.phy_id,))
            chip_counts = _split(node_count, chips, Spread.CONSOLIDATE, _Numa((), chips))
            for chip, chip_count in zip(chips, chip_counts, strict=True):
                ordered = sorted(chip.entries, key=lambda entry: (entry.place.id not in must, entry.order))
                chosen += ordered[:chip_count]
        return chosen


def _packed_bins(
    entries: list[_Entry], must: set[str], key: Callable[[_Entry], tuple[int, ...]]
) -> list[_Bin]:
    """The entries grouped by ``key``, in key order, each group packed by best fit."""
    grouped: dict[tuple[int, ...], list[_Entry]] = collections.defaultdict(list)
    for entry in entries:
        grouped[key(entry)].append(entry)
    return [_Bin(group, grouped[group], must, _PACKED, best_fit) for group in sorted(grouped)]
