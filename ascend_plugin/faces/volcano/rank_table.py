"""The rank-table annotation HCCL jobs read: ``ascend.kubectl.kubernetes.io/ascend-910-configuration``.

On the nodes whose family writes one (``ChipBackend.has_rank_table``: 910, the
Atlas 300I Duo) every pod holding chips gets one compact JSON object in the
field order Huawei's plugin writes: ``pod_name``, ``server_id`` (its UID),
``host_ip`` and per chip its RoCE ``device_ip`` ("-1" where DCMI gives none)
and ``super_device_id`` ("-2": super-pod facts are not read here).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.faces.volcano.pods import Pod
from ascend_plugin.inventory.inventory import Inventory
from backends.backend import ChipBackend
from backends.errors import ChipError

log = logging.getLogger(__name__)

NO_DEVICE_IP = "-1"
UNKNOWN_SUPER_DEVICE = "-2"


@dataclass(frozen=True)
class RankDevice:
    """One chip of the pod: its physical id and RoCE address."""

    phy_id: int
    device_ip: str


def rank_table(pod: Pod, host_ip: str, devices: Sequence[RankDevice]) -> str:
    """The annotation's value for ``pod`` holding ``devices``."""
    document = {
        "pod_name": pod.name,
        "server_id": pod.uid,
        "host_ip": host_ip,
        "devices": [
            {
                "device_id": str(device.phy_id),
                "device_ip": device.device_ip,
                "super_device_id": UNKNOWN_SUPER_DEVICE,
            }
            for device in sorted(devices, key=lambda device: device.phy_id)
        ],
    }
    return json.dumps(document, separators=(",", ":"))


def usable_address(text: str | None) -> str:
    """A RoCE address other nodes can reach, else NO_DEVICE_IP (none, loopback or link-local)."""
    if not text:
        return NO_DEVICE_IP
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return NO_DEVICE_IP
    if address.is_loopback or address.is_link_local or address.is_unspecified:
        return NO_DEVICE_IP
    return str(address)


class DeviceIps:
    """Reads a chip's RoCE address on that chip's call lane, when a rank table needs it."""

    def __init__(self, calls: ChipCalls, backend: ChipBackend, inventory: Inventory) -> None:
        self.calls = calls
        self.backend = backend
        self.inventory = inventory

    async def of(self, phy_id: int) -> str:
        """The chip's address for the rank table; NO_DEVICE_IP where DCMI does not give one."""
        state = self.inventory.get(phy_id)
        if state is None:
            return NO_DEVICE_IP
        try:
            text = await self.calls.call(phy_id, "device_ip", self.backend.device_ip, state.chip)
        except (ChipCallError, ChipError) as error:
            log.warning("cannot read the device IP of %s: %s", state.chip.label, error)
            return NO_DEVICE_IP
        return usable_address(text)
