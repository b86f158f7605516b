"""ContainerGrant: what a container holding some devices gets, whatever face asked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ascend_plugin.offers.base import DeviceNode


@dataclass(frozen=True)
class HostMount:
    """A host path to mount into a container."""

    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerGrant:
    """Environment, device nodes, mounts, CDI device names and annotations for one container."""

    envs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    devices: tuple[DeviceNode, ...] = ()
    mounts: tuple[HostMount, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
