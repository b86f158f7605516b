"""What a kubelet sends a device-plugin socket: the data the request guard (``grpc_guard``) checks by.

GetPreferredAllocation lists the kubelet's own view, which lags ours, and a refusal fails admission: its
lists are bounded by what a kubelet can ever have been told of the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ascend_plugin.grpc_guard import wire_check as wire
from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    Empty,
    PreferredAllocationRequest,
    PreStartContainerRequest,
)

# Huawei's plugin refuses longer device IDs; ours are far shorter (Ascend910-15).
MAX_REQUEST_ID_LENGTH: Final = 50
# The most devices one resource offers per chip: share_count's maximum (100) is above any chip's
# vNPU count (a vNPU holds at least one of the chip's AI cores, of which a 910 has 32 at most).
MAX_DEVICES_PER_CHIP: Final = 100

DEVICES: Final = "devices"  # the resource's device count now
CONTAINERS: Final = "containers"  # container requests per call: the device count, at least one
KUBELET_VIEW: Final = "kubelet view"  # the most devices the kubelet can have been told of

_DEVICE_ID = wire.TextLimit("device IDs", MAX_REQUEST_ID_LENGTH)
_ONE_CONTAINER = wire.EntryLimit(1, "one container (a kubelet asks for one at a time)")

_CONTAINER_ALLOCATE = wire.MessageShape(
    "ContainerAllocateRequest", {1: wire.text_field("devices_ids", _DEVICE_ID, entries=DEVICES)}
)
_CONTAINER_PREFERRED = wire.MessageShape(
    "ContainerPreferredAllocationRequest",
    {
        1: wire.text_field("available_deviceIDs", _DEVICE_ID, entries=KUBELET_VIEW),
        2: wire.text_field("must_include_deviceIDs", _DEVICE_ID, entries=KUBELET_VIEW),
        3: wire.number_field("allocation_size"),
    },
)

# Every request message the DevicePlugin service receives.
REQUEST_SHAPES: Mapping[type, wire.MessageShape] = {
    Empty: wire.MessageShape("Empty"),
    AllocateRequest: wire.MessageShape(
        "AllocateRequest", {1: wire.message_field("container_requests", _CONTAINER_ALLOCATE, entries=DEVICES)}
    ),
    PreferredAllocationRequest: wire.MessageShape(
        "PreferredAllocationRequest",
        {1: wire.message_field("container_requests", _CONTAINER_PREFERRED, entries=CONTAINERS)},
    ),
    PreStartContainerRequest: wire.MessageShape(
        "PreStartContainerRequest", {1: wire.text_field("devices_ids", _DEVICE_ID, entries=DEVICES)}
    ),
}


def request_limits(resource: str, devices: int, chips: int) -> wire.RequestLimits:
    """The bounds of one request to ``resource``'s socket, with ``devices`` offered on ``chips`` chips."""
    offered = wire.EntryLimit(devices, f"the {devices} {resource} device(s) on this node")
    view = max(devices, chips * MAX_DEVICES_PER_CHIP)
    return {
        DEVICES: offered,
        CONTAINERS: offered if devices else _ONE_CONTAINER,
        KUBELET_VIEW: wire.EntryLimit(
            view,
            f"the {view} {resource} devices a kubelet can have been told of on this node "
            f"({MAX_DEVICES_PER_CHIP} per chip)",
        ),
    }
