"""resource.k8s.io/v1 ResourceSlices as the loopback stand-in admits them (what fast tests and simulate need).

In the real server's order: drop, default, refuse; tests/e2e/test_slice_admission.py holds it to the real one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

PARTITIONS: Final = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY: Final = "DRAConsumableCapacity"
DEVICE_TAINTS: Final = "DRADeviceTaints"
# The release from which each gate is on by default (beta); off before it (alpha).
GATES_ON_FROM: Final = {PARTITIONS: (1, 36), CONSUMABLE_CAPACITY: (1, 36), DEVICE_TAINTS: (1, 36)}

MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64  # 1.35+: once any device has taints or consumes counters
MAX_COUNTER_SETS = 8  # 1.35+
_NODE_FIELDS = ("consumesCounters", "nodeName", "nodeSelector", "allNodes")


@dataclass(frozen=True)
class ServerVersion:
    """A Kubernetes API server: its release, and feature gates set against their defaults."""

    release: tuple[int, int] = (1, 34)
    gates: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, version: str, gates: Mapping[str, bool] | None = None) -> ServerVersion:
        """``ServerVersion.of("1.36")``."""
        major, minor = (int(part) for part in version.split(".")[:2])
        return cls((major, minor), dict(gates or {}))

    def gate(self, name: str) -> bool:
        """Whether the feature gate ``name`` is on."""
        return self.gates.get(name, self.release >= GATES_ON_FROM[name])

    @property
    def split_layout(self) -> bool:
        """1.35+: counter sets and devices in slices of their own."""
        return self.release >= (1, 35)


def _devices(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    devices = spec.get("devices")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def _uses_partitions(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("sharedCounters") or spec.get("perDeviceNodeSelection")) or any(
        device.get(key) is not None and device.get(key) != []
        for device in _devices(spec)
        for key in _NODE_FIELDS
    )


def _uses_consumable_capacity(spec: Mapping[str, Any]) -> bool:
    return any(
        device.get("allowMultipleAllocations") is not None
        or any(isinstance(c, dict) and "requestPolicy" in c for c in (device.get("capacity") or {}).values())
        for device in _devices(spec)
    )


def drop_disabled_fields(spec: dict[str, Any], old: Mapping[str, Any] | None, server: ServerVersion) -> None:
    """What a gate that is off does not let in (unless the old object has it)."""
    old = old or {}
    if not server.gate(PARTITIONS) and not _uses_partitions(old):
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        for device in _devices(spec):
            for key in _NODE_FIELDS:
                device.pop(key, None)
    if not server.gate(CONSUMABLE_CAPACITY) and not _uses_consumable_capacity(old):
        for device in _devices(spec):
            device.pop("allowMultipleAllocations", None)
            for capacity in (device.get("capacity") or {}).values():
                if isinstance(capacity, dict):
                    capacity.pop("requestPolicy", None)
    if not server.gate(DEVICE_TAINTS) and not any(device.get("taints") for device in _devices(old)):
        for device in _devices(spec):
            device.pop("taints", None)


def stamp_defaults(spec: dict[str, Any]) -> None:
    """What the server writes into a slice itself: a taint's ``timeAdded`` (the time of the write)."""
    for device in _devices(spec):
        for taint in device.get("taints") or []:
            if isinstance(taint, dict):
                taint.setdefault("timeAdded", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def stored_form(spec: dict[str, Any], server: ServerVersion) -> None:
    """The slice as the server writes it back: empty lists and maps left out, but 1.34's ``devices``,
    which is null when empty."""
    for key in [key for key, value in spec.items() if value in ([], {})]:
        del spec[key]
    for device in _devices(spec):
        for key in [key for key, value in device.items() if value in ([], {})]:
            del device[key]
    if not server.split_layout:
        spec.setdefault("devices", None)


def layout_problems(spec: Mapping[str, Any], server: ServerVersion) -> list[str]:
    """What ``server`` finds wrong with the slice's shape, each as ``field: Type: detail``."""
    sets = [s for s in spec.get("sharedCounters") or [] if isinstance(s, dict)]
    devices = _devices(spec)
    problems = []
    if server.split_layout:
        if spec.get("sharedCounters") is not None and spec.get("devices") is not None:  # [] counts
            problems.append('spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed')
        if len(sets) > MAX_COUNTER_SETS:
            problems.append(
                f"spec.sharedCounters: Too many: {len(sets)}: must have at most {MAX_COUNTER_SETS} items"
            )
    advanced = any(device.get("taints") or device.get("consumesCounters") for device in devices)
    limit = MAX_DEVICES_ADVANCED if server.split_layout and advanced else MAX_DEVICES
    if len(devices) > limit:
        problems.append(f"spec.devices: Too many: {len(devices)}: must have at most {limit} items")
    if not server.split_layout:
        names = {s.get("name") for s in sets}
        for index, device in enumerate(devices):
            for entry, consumption in enumerate(device.get("consumesCounters") or []):
                wanted = consumption.get("counterSet") if isinstance(consumption, dict) else None
                if wanted not in names:
                    problems.append(
                        f"spec.devices[{index}].consumesCounters[{entry}].counterSet: Invalid value: "
                        f'"{wanted}": must reference a counterSet defined in the ResourceSlice sharedCounters'
                    )
    return problems


def admit(obj: dict[str, Any], previous: Mapping[str, Any] | None, server: ServerVersion) -> list[str]:
    """Drop, default and validate ``obj`` in place as the server would; the problems with its shape.

    A slice without problems is left in its stored form."""
    spec = obj["spec"]
    drop_disabled_fields(spec, (previous or {}).get("spec"), server)
    stamp_defaults(spec)
    problems = layout_problems(spec, server)
    if not problems:
        stored_form(spec, server)
    return problems
