"""Huawei's device-info ConfigMap format, byte for byte where a reader checks it.

Volcano's Ascend plugin (and ClusterD, and Huawei's own tools) read
``mindx-dl-deviceinfo-<node>`` and reject it unless ``CheckCode`` matches. In
Huawei's sources (mind-cluster, ``ascend-device-plugin/pkg/kubeclient``,
``WriteDeviceInfoDataIntoCM``; Volcano's ``checkNodeDeviceInfo``) the check
code is ``hex(sha256(json.Marshal(DeviceInfo)))`` where ``DeviceInfo`` is the Go
struct ``{DeviceList map[string]string; UpdateTime int64}``. Go's encoder
writes struct fields in declaration order, map keys sorted, no whitespace, and
escapes ``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\u003c`` and so on; it
leaves other non-ASCII text as UTF-8. :func:`go_json` does the same, and a test
checks it against a ConfigMap (with its CheckCode) published in Huawei's docs.

The rest follows Huawei's structs too: the whole value is
``{"DeviceInfo":…,"SuperPodID":-2,"ServerIndex":-2,"CheckCode":…}`` (-2: no
super pod), the ``-Fault`` entry is the Go JSON of ``[]DeviceFault`` with fields
``fault_type, npu_name, large_model_fault_level, fault_level, fault_handling,
fault_code, fault_time_and_level_map`` in that order (``[]`` without faults),
and ``ManuallySeparateNPU`` is a data key of the ConfigMap beside
``DeviceInfoCfg``, not part of the DeviceList.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ascend_plugin.faces.kube.chips import ChipView
from ascend_plugin.faults import FaultLevel, format_code

DATA_KEY = "DeviceInfoCfg"
MANUALLY_SEPARATED_KEY = "ManuallySeparateNPU"
CONSUMER_LABEL = ("mx-consumer-cim", "true")
NO_SUPER_POD = -2  # SuperPodID and ServerIndex of a node outside a super pod

# Where Huawei's plugin files a resource's faults under another resource's key.
# On 310 and 310B nodes (resource huawei.com/Ascend310) it writes the
# huawei.com/Ascend310P-Fault key; readers written against it look there.
QUIRK_FAULT_KEYS: Mapping[str, str] = {"huawei.com/Ascend310": "huawei.com/Ascend310P-Fault"}

V = TypeVar("V")

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED = str.maketrans(_GO_ESCAPES)


def go_json(value: object) -> str:
    """``value`` as Go's ``json.Marshal`` writes it.

    Mapping order is kept as given: pass struct fields in declaration order and
    map entries sorted (see :func:`go_map`).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # The escaped characters can only occur inside JSON strings, so translating
    # the whole text touches nothing else.
    return text.translate(_GO_ESCAPED)


def go_map(entries: Mapping[str, V]) -> dict[str, V]:
    """A Go map's entries in the order its encoder writes them (keys sorted bytewise)."""
    return dict(sorted(entries.items(), key=lambda item: item[0].encode()))


def check_code(device_info: Mapping[str, object]) -> str:
    """Huawei's CheckCode of a DeviceInfo object: sha256 hex of its Go JSON."""
    return hashlib.sha256(go_json(device_info).encode("utf-8")).hexdigest()


def fault_key(resource_name: str) -> str:
    """The DeviceList key of the fault list for ``resource_name``."""
    return QUIRK_FAULT_KEYS.get(resource_name, f"{resource_name}-Fault")


class FaultClock:
    """When each current fault code of each device was first seen, in Unix milliseconds.

    DCMI does not say when a fault was raised; the first health round that saw
    it is the best figure we have. A code that clears is forgotten, so a fault
    that comes back gets a new time, as it does in Huawei's plugin.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._first_seen: dict[tuple[str, int], int] = {}

    def observe(self, devices: Iterable[ChipView]) -> Mapping[tuple[str, int], int]:
        """Record the faults of ``devices``; (device ID, code) -> first-seen time of each current one."""
        now = int(self.clock() * 1000)
        current = {(device.id, fault.code) for device in devices for fault in device.faults}
        self._first_seen = {key: self._first_seen.get(key, now) for key in current}
        return dict(self._first_seen)


def fault_entry(device: ChipView, first_seen: Mapping[tuple[str, int], int]) -> dict[str, object]:
    """One ``DeviceFault`` of the ``-Fault`` list, fields in Huawei's struct order."""
    level = device.worst_level.name
    return {
        "fault_type": "CardUnhealthy",
        "npu_name": device.id,
        "large_model_fault_level": level,
        "fault_level": level,
        "fault_handling": level,
        "fault_code": ",".join(device.codes),
        "fault_time_and_level_map": go_map(
            {
                format_code(fault.code): {
                    "fault_time": first_seen[device.id, fault.code],
                    "fault_level": fault.level.name,
                }
                for fault in device.faults
            }
        ),
    }


@dataclass(frozen=True)
class DeviceInfoContent:
    """What the ConfigMap says, apart from its time stamp: a change here is worth a write."""

    device_list: Mapping[str, str]
    manually_separated: str

    def data(self, update_time: int) -> dict[str, str]:
        """The ConfigMap's data with ``update_time`` (Unix seconds) as UpdateTime."""
        device_info = {"DeviceList": go_map(self.device_list), "UpdateTime": update_time}
        document = {
            "DeviceInfo": device_info,
            "SuperPodID": NO_SUPER_POD,
            "ServerIndex": NO_SUPER_POD,
            "CheckCode": check_code(device_info),
        }
        return {DATA_KEY: go_json(document), MANUALLY_SEPARATED_KEY: self.manually_separated}


def device_info_content(
    devices: Iterable[ChipView],
    resource_name: str,
    first_seen: Mapping[tuple[str, int], int],
    held: frozenset[int] = frozenset(),
) -> DeviceInfoContent:
    """The device-info content for ``devices`` (by physical id).

    ``<resource>`` is the free list: the healthy devices no active pod holds.
    Only Volcano mode knows which chips pods hold (``held``, physical ids, from
    each pod's ``huawei.com/AscendReal``); otherwise every healthy chip is listed
    and Volcano subtracts the pods it placed itself.
    """
    devices = list(devices)
    device_list = {
        resource_name: ",".join(
            device.id for device in devices if device.healthy and device.state.phy_id not in held
        ),
        f"{resource_name}-Unhealthy": ",".join(device.id for device in devices if not device.healthy),
        fault_key(resource_name): go_json(
            [fault_entry(device, first_seen) for device in devices if device.faults]
        ),
    }
    separated = ",".join(
        device.id
        for device in devices
        if any(fault.level is FaultLevel.ManuallySeparateNPU for fault in device.faults)
    )
    return DeviceInfoContent(device_list, separated)
