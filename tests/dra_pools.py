"""The scheduler's view of a driver's pool: whether the allocator would allocate from these slices.

As the allocator of ``k8s.io/dynamic-resource-allocation`` reads a pool: the newest generation
only, every slice of it present, counter-set names unique across the pool, every consumed counter
defined, every device name once. The API server checks none of this (each slice alone is valid);
the DRA tests check the plugin's pools with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _devices(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    devices = spec.get("devices")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def pool_problems(slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """Why the allocator would not allocate from these slices' pools (empty: every pool is usable)."""
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for slice_ in slices:
        spec = slice_["spec"]
        pools.setdefault((spec["driver"], spec["pool"]["name"]), []).append(spec)
    problems = []
    for (driver, name), specs in sorted(pools.items()):
        newest = max(spec["pool"]["generation"] for spec in specs)
        current = [spec for spec in specs if spec["pool"]["generation"] == newest]
        where = f"pool {driver}/{name} generation {newest}"
        counts = {spec["pool"]["resourceSliceCount"] for spec in current}
        if counts != {len(current)}:
            problems.append(f"{where}: {len(current)} slice(s), resourceSliceCount says {sorted(counts)}")
        sets: dict[str, Mapping[str, Any]] = {}
        for spec in current:
            for counter_set in spec.get("sharedCounters") or []:
                if counter_set["name"] in sets:
                    problems.append(f"{where}: counter set {counter_set['name']} defined twice")
                sets[counter_set["name"]] = counter_set.get("counters") or {}
        names: list[str] = []
        for spec in current:
            for device in _devices(spec):
                names.append(device["name"])
                for consumption in device.get("consumesCounters") or []:
                    known = sets.get(consumption["counterSet"])
                    if known is None:
                        problems.append(
                            f"{where}: {device['name']} consumes missing set {consumption['counterSet']}"
                        )
                        continue
                    for counter in consumption["counters"]:
                        if counter not in known:
                            problems.append(f"{where}: {device['name']} consumes missing counter {counter}")
        for duplicate in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"{where}: device {duplicate} published twice")
    return problems
