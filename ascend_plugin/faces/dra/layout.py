"""The pool's ResourceSlices: which slice holds which counter sets and devices, within the API's limits.

Since Kubernetes 1.35 a slice holds counter sets or devices, never both, at
most 8 counter sets, and at most 64 devices once any of them carries a taint
or consumes counters (128 otherwise). So the pool is laid out as the
allocator reads it: the counter sets first, 8 to a slice, then the devices,
a chip's devices (the whole chip and its partitions) always in the same slice,
as many chips to a slice as fit. Every slice of the pool carries the same
generation and the pool's slice count, so the scheduler uses the pool only once
it has seen all of them.

A pool without a device is still one (empty) slice, so the pool and its
generation stay visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ascend_plugin.faces.dra.devices import PoolDevices
from ascend_plugin.faces.dra.names import (
    MAX_COUNTER_SETS_PER_SLICE,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_PER_SLICE_ADVANCED,
)
from ascend_plugin.kubeapi.client import JsonObject

API_VERSION = "resource.k8s.io/v1"  # the ResourceSlices' API group and version
COUNTERS = "sharedCounters"
DEVICES = "devices"


def spec_devices(spec: Mapping[str, object]) -> list[JsonObject]:
    """The devices of a slice's spec (or of a slice's content), whatever else the API server put there."""
    devices = spec.get(DEVICES)
    return [device for device in devices if isinstance(device, dict)] if isinstance(devices, list) else []


def _advanced(device: JsonObject) -> bool:
    return bool(device.get("taints") or device.get("consumesCounters"))


def device_limit(devices: Sequence[JsonObject]) -> int:
    """How many devices one slice of these may hold: 64 once any has taints or consumes counters."""
    return MAX_DEVICES_PER_SLICE_ADVANCED if any(_advanced(d) for d in devices) else MAX_DEVICES_PER_SLICE


def slice_contents(pool: PoolDevices) -> list[JsonObject]:
    """The spec content of each slice (``sharedCounters`` or ``devices``), counter slices first."""
    contents: list[JsonObject] = [
        {COUNTERS: pool.counter_sets[start : start + MAX_COUNTER_SETS_PER_SLICE]}
        for start in range(0, len(pool.counter_sets), MAX_COUNTER_SETS_PER_SLICE)
    ]
    limit = device_limit(pool.devices)
    chunk: list[JsonObject] = []
    for chip in pool.chips:
        if len(chunk) + len(chip) > limit and chunk:
            contents.append({DEVICES: chunk})
            chunk = []
        assert len(chip) <= limit  # a chip's partitions: 31 at most (a 32-core 910)
        chunk = [*chunk, *chip]
    if chunk or not contents:
        contents.append({DEVICES: chunk})
    return contents
