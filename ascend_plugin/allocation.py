"""Allocate and GetPreferredAllocation: check the kubelet's IDs, say what a container needs.

Three ways to hand NPUs to a container, picked once at start-up:

* device mode: the plugin lists the device nodes (``/dev/davinci<phy>`` and the
  family's shared nodes present on the host) and mounts the driver read-only;
* runtime mode: the Ascend Docker Runtime does the mounting, the plugin only
  sets ``ASCEND_VISIBLE_DEVICES`` and friends. It is chosen automatically when
  the plugin's own container was started by that runtime
  (``ASCEND_DOCKER_RUNTIME=True`` in its environment);
* CDI mode: the container runtime edits the container from the node's CDI
  spec (:mod:`ascend_plugin.cdi`); the plugin answers with CDI device names.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from grpclib.const import Status

from ascend_plugin.cdi import CdiSpec
from ascend_plugin.kubelet_api.v1beta1 import ContainerAllocateResponse, DeviceSpec, Mount
from ascend_plugin.naming import MAX_DEVICE_ID_LENGTH
from ascend_plugin.registry import DeviceRegistry, DeviceState
from backends.base import ChipBackend


class AllocateMode(enum.Enum):
    """How a container gets its NPUs."""

    DEVICE = "device"
    RUNTIME = "runtime"
    CDI = "cdi"


def resolve_mode(setting: str, environ: Mapping[str, str] = os.environ) -> AllocateMode:
    """``auto`` becomes runtime mode inside a container the Ascend Docker Runtime started."""
    if setting == "auto":
        return AllocateMode.RUNTIME if environ.get("ASCEND_DOCKER_RUNTIME") == "True" else AllocateMode.DEVICE
    return AllocateMode(setting)


class AllocationRefused(Exception):
    """The request names a device the plugin cannot hand out; ``status`` is the gRPC status."""

    def __init__(self, status: Status, kind: str, message: str) -> None:
        self.status = status
        self.kind = kind  # empty, malformed, duplicate, unknown or unhealthy: a metrics label
        self.reason = message
        super().__init__(message)


class Allocator:
    """Turns validated device IDs into container responses."""

    def __init__(
        self,
        registry: DeviceRegistry,
        backend: ChipBackend,
        mode: AllocateMode,
        host_root: Path,
        cdi: CdiSpec | None = None,
    ) -> None:
        if mode is AllocateMode.CDI and cdi is None:
            raise ValueError("CDI mode needs the node's CDI spec")
        self.cdi = cdi
        self.registry = registry
        self.backend = backend
        self.mode = mode
        self.host_root = host_root
        prefix = re.escape(backend.table.device_id_prefix)
        self._id_pattern = re.compile(rf"^{prefix}-(0|[1-9][0-9]{{0,3}})$")

    def check(self, device_ids: Sequence[str]) -> list[DeviceState]:
        """The devices named, in order; AllocationRefused names the first bad ID and why."""
        if not device_ids:
            raise AllocationRefused(Status.INVALID_ARGUMENT, "empty", "the request names no device IDs")
        seen: set[str] = set()
        devices = []
        for device_id in device_ids:
            if len(device_id) > MAX_DEVICE_ID_LENGTH or not self._id_pattern.match(device_id):
                raise AllocationRefused(
                    Status.INVALID_ARGUMENT,
                    "malformed",
                    f"device ID {device_id[:80]!r} is malformed; expected "
                    f"'{self.backend.table.device_id_prefix}-<physical id>' "
                    f"for {self.registry.resource_name}",
                )
            if device_id in seen:
                raise AllocationRefused(
                    Status.INVALID_ARGUMENT, "duplicate", f"device ID {device_id!r} appears twice"
                )
            seen.add(device_id)
            device = self.registry.get(device_id)
            if device is None:
                known = ", ".join(d.id for d in self.registry.devices()) or "none"
                raise AllocationRefused(
                    Status.INVALID_ARGUMENT,
                    "unknown",
                    f"device ID {device_id!r} is not on this node; known devices: {known}",
                )
            if not device.healthy:
                raise AllocationRefused(
                    Status.FAILED_PRECONDITION,
                    "unhealthy",
                    f"device {device_id} is unhealthy: {device.reason}",
                )
            devices.append(device)
        return devices

    def container_response(self, devices: Sequence[DeviceState]) -> ContainerAllocateResponse:
        """What the runtime must give a container holding ``devices``."""
        phy_ids = [device.chip.phy_id for device in devices]
        if self.mode is AllocateMode.RUNTIME:
            return ContainerAllocateResponse(envs=self.backend.runtime_env(phy_ids))
        if self.cdi is not None and self.mode is AllocateMode.CDI:
            return self.cdi.response(phy_ids, [device.id for device in devices])
        return ContainerAllocateResponse(
            devices=[
                DeviceSpec(
                    container_path=node.container_path, host_path=node.host_path, permissions=node.permissions
                )
                for node in self.backend.device_nodes(phy_ids, self.host_root)
            ],
            mounts=[
                Mount(
                    container_path=mount.container_path, host_path=mount.host_path, read_only=mount.read_only
                )
                for mount in self.backend.driver_mounts(self.host_root)
            ],
        )


def preferred_devices(available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """A valid preference: every must-include ID, then available ones, ``size`` in all.

    Fewer than ``size`` IDs come back only when fewer are available; the kubelet
    tolerates a short answer. Order is kept stable (by the kubelet's order) so
    repeated calls agree.
    """
    chosen = list(dict.fromkeys(must_include))
    for device_id in available:
        if len(chosen) >= size:
            break
        if device_id not in chosen:
            chosen.append(device_id)
    return chosen[: max(size, len(dict.fromkeys(must_include)))]
