"""The three handover modes and the table Allocate picks from: ``device`` (device nodes and the driver
mounted), ``runtime`` (``ASCEND_VISIBLE_DEVICES`` for the Ascend Docker Runtime), ``cdi`` (:mod:`.cdi`).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar

from ascend_plugin.handover.cdi import CdiSpec
from ascend_plugin.handover.host_devices import HostDevices, HostMount
from ascend_plugin.offers.base import DeviceNode, OfferedDevice
from backends.families import FamilyTable

T = TypeVar("T")


@dataclass(frozen=True)
class ContainerGrant:
    """What a container holding some devices gets, whatever face asked: environment, device nodes,
    mounts, CDI device names and annotations."""

    envs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    devices: tuple[DeviceNode, ...] = ()
    mounts: tuple[HostMount, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


class HandoverMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CDI = "cdi"


def resolve_mode(setting: str, environ: Mapping[str, str] = os.environ) -> HandoverMode:
    """``auto`` becomes runtime mode inside a container the Ascend Docker Runtime started."""
    if setting == "auto":
        return HandoverMode.RUNTIME if environ.get("ASCEND_DOCKER_RUNTIME") == "True" else HandoverMode.DEVICE
    return HandoverMode(setting)


@dataclass(frozen=True)
class HandoverContext:
    """What the modes draw on: the family's rules, the host's devices, the node's CDI spec."""

    table: FamilyTable
    host: HostDevices
    cdi: CdiSpec


class Handover(Protocol):
    mode: HandoverMode

    def grant(self, devices: Sequence[OfferedDevice]) -> ContainerGrant:
        """What a container holding ``devices`` gets."""


def _once(items: Iterable[T]) -> tuple[T, ...]:
    return tuple(dict.fromkeys(items))


class DeviceHandover:
    """Device nodes and read-only driver mounts, listed by the plugin."""

    mode = HandoverMode.DEVICE

    def __init__(self, context: HandoverContext) -> None:
        self.host = context.host

    def grant(self, devices: Sequence[OfferedDevice]) -> ContainerGrant:
        own = _once(device.node for device in devices)
        return ContainerGrant(envs=self.host.env, devices=(*own, *self.host.shared), mounts=self.host.mounts)


class RuntimeHandover:
    """Environment only: the Ascend Docker Runtime mounts what it names."""

    mode = HandoverMode.RUNTIME

    def __init__(self, context: HandoverContext) -> None:
        self.extra = context.table.runtime_env
        self.host = context.host

    def grant(self, devices: Sequence[OfferedDevice]) -> ContainerGrant:
        virtual = any(device.virtual for device in devices)
        env = {
            "ASCEND_VISIBLE_DEVICES": ",".join(_once(device.visible for device in devices)),
            "ASCEND_RUNTIME_OPTIONS": "VIRTUAL" if virtual else "",
        }
        env.update(self.extra)
        env.update(self.host.env)
        return ContainerGrant(envs=MappingProxyType(env))


class CdiHandover:
    """CDI device names from the node's spec, as ``cdi_devices`` and as the older annotation."""

    mode = HandoverMode.CDI

    def __init__(self, context: HandoverContext) -> None:
        self.cdi = context.cdi

    def grant(self, devices: Sequence[OfferedDevice]) -> ContainerGrant:
        names = _once(self.cdi.qualified(device.cdi_name) for device in devices)
        return ContainerGrant(
            cdi_devices=names,
            annotations=MappingProxyType({self.cdi.annotation_key(devices[0].id): ",".join(names)}),
        )


MODES: Mapping[HandoverMode, Callable[[HandoverContext], Handover]] = MappingProxyType(
    {
        HandoverMode.DEVICE: DeviceHandover,
        HandoverMode.RUNTIME: RuntimeHandover,
        HandoverMode.CDI: CdiHandover,
    }
)
