"""The names the DRA driver gives things, and the API's limits for them (docs/dra.md, "ResourceSlices").

``npu-<physical id>`` for a chip, ``npu-<phy>-<template>-<n>`` for a partition, ``npu-<phy>-counters`` for
a chip's counter set, the node for the pool; attribute names are C identifiers in the driver's domain.
"""

from __future__ import annotations

import re
from typing import Final

DEVICE_PREFIX: Final = "npu-"

# The registration service's answer: the kubelet takes the first service it knows.
PLUGIN_TYPE: Final = "DRAPlugin"
SUPPORTED_SERVICES: Final = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth")

DRA_SOCKET: Final = "dra.sock"
CHECKPOINT: Final = "checkpoint.json"

# resource.k8s.io/v1 limits (k8s.io/api/resource/v1/types.go).
MAX_DEVICES_PER_SLICE: Final = 128
# From 1.35, whenever any device of the slice has taints or consumes counters.
MAX_DEVICES_PER_SLICE_ADVANCED: Final = 64
MAX_COUNTER_SETS_PER_SLICE: Final = 8  # 1.35+, in slices that hold no devices
MAX_COUNTERS_PER_SET: Final = 32
MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32
MAX_ATTRIBUTE_NAME: Final = 32
MAX_STRING_VALUE: Final = 64

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEVICE_NAME = re.compile(rf"^{re.escape(DEVICE_PREFIX)}(0|[1-9][0-9]{{0,5}})$")
_CHIP_DEVICE = re.compile(rf"^{re.escape(DEVICE_PREFIX)}(0|[1-9][0-9]{{0,5}})(-[a-z0-9][-a-z0-9]*)?$")


def device_name(phy_id: int) -> str:
    """``npu-<physical id>``."""
    return f"{DEVICE_PREFIX}{phy_id}"


def counter_set_name(phy_id: int) -> str:
    """The counter set of a chip split on demand: ``npu-<physical id>-counters``."""
    return f"{device_name(phy_id)}-counters"


def partition_name(phy_id: int, template: str, index: int) -> str:
    """The ``index``-th partition of ``template`` on a chip: ``npu-0-vir02-1c-3`` (a DNS label)."""
    return f"{device_name(phy_id)}-{template.replace('_', '-').lower()}-{index}"


def phy_of(name: str) -> int | None:
    """The physical id a device name stands for; None when it is not one of ours."""
    found = _DEVICE_NAME.match(name)
    return int(found[1]) if found else None


def chip_of(name: str) -> int | None:
    """The chip a device of ours is or sits on: ``npu-<phy>``, or a partition ``npu-<phy>-<template>-<n>``."""
    found = _CHIP_DEVICE.match(name)
    return int(found[1]) if found and not name.endswith("-counters") else None


def registration_socket(driver: str) -> str:
    """The registration socket's file name in the kubelet's plugin registry: ``<driver>-reg.sock``."""
    return f"{driver}-reg.sock"


def request_base(name: str) -> str:
    """The request a result belongs to: ``npus/fast`` (a subrequest of ``firstAvailable``) -> ``npus``."""
    return name.split("/", 1)[0]


def checked_attribute_name(name: str) -> str:
    """``name`` if the API takes it as an attribute name, ``[domain/]identifier``; else ValueError (a bug)."""
    identifier = name.rsplit("/", 1)[-1]
    if len(identifier) > MAX_ATTRIBUTE_NAME or not _C_IDENTIFIER.match(identifier):
        raise ValueError(
            f"device attribute {name!r}: the name after the domain must be a C identifier of at most "
            f"{MAX_ATTRIBUTE_NAME} characters"
        )
    return name
