"""What an offered device is, and the protocol every way of offering chips follows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ascend_plugin.inventory.inventory import ChipState, Inventory
from backends.topology import TopologyUnit


@dataclass(frozen=True)
class DeviceNode:
    host_path: str
    container_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class IdForm:
    """The shape of a resource's device IDs: a prefix and numbered fields (``Ascend310-<physical id>``)."""

    prefix: str
    fields: tuple[str, ...]

    @property
    def pattern(self) -> re.Pattern[str]:
        """IDs of this form: the prefix, then each field as a number without leading zeros."""
        return re.compile(rf"^{re.escape(self.prefix)}" + r"-(0|[1-9][0-9]{0,3})" * len(self.fields) + "$")

    def __str__(self) -> str:
        return "-".join([self.prefix, *(f"<{name}>" for name in self.fields)])


@dataclass(frozen=True)
class OfferedDevice:
    """One device of one extended resource, as the kubelet (or a DRA claim) sees it: healthy while all its
    ``chips`` are."""

    id: str
    resource: str
    form: IdForm
    chips: tuple[int, ...]
    node: DeviceNode
    visible: str
    cdi_name: str
    healthy: bool
    reason: str = ""
    virtual: bool = False  # a vNPU: the runtime needs ASCEND_RUNTIME_OPTIONS=VIRTUAL
    unit: TopologyUnit | None = None  # its chip's topology unit (placement keeps requests inside few)
    numa_node: int | None = None


VNPUS_UNKNOWN = "its vNPUs could not be read yet, so it may be split (the log says why)"


def chip_health(states: Sequence[ChipState]) -> tuple[bool, str]:
    """Healthy when every chip behind a device is and its vNPUs are known; else the first reason why not."""
    for state in states:
        if not state.healthy:
            return False, state.reason
        if state.vnpus is None:
            return False, VNPUS_UNKNOWN
    return True, ""


class Offer(Protocol):
    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        """Every device this offer makes of the inventory as it is now."""
