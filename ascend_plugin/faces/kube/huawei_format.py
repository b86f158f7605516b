"""Huawei's device-info ConfigMap format, byte for byte where a reader checks it: ClusterD rejects it
unless ``CheckCode`` is the SHA-256 of the Go JSON of ``DeviceInfo``, so :func:`go_json` writes what Go's
``json.Marshal`` writes. docs/kubernetes.md, "The device-info ConfigMap".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from ascend_plugin.fault_policy.chip import ChipJudgement, CodeTime, FaultSide
from ascend_plugin.fault_policy.escalations import UpgradeKind, UpgradeReason
from ascend_plugin.fault_policy.faults import FaultLevel, format_code
from ascend_plugin.inventory.inventory import ChipState, Inventory
from backends.family_table import FamilyTable
from backends.library import SuperPodInfo

DATA_KEY = "DeviceInfoCfg"
MANUALLY_SEPARATED_KEY = "ManuallySeparateNPU"
UPGRADE_REASON_KEY = "UpgradeFaultReason"
DESCRIPTION_KEY = "Description"
DESCRIPTION = (
    "The field[xxx.com/xxx] is sunset. Volcano has the ability to maintain the usage status of chips on "
    "its own, and can temporarily use this field by configuring the Volcano parameter "
    "'self-maintain-available-card'"
)
CONSUMER_LABEL = ("mx-consumer-cim", "true")
CHIP_FAULT = "CardUnhealthy"
NETWORK_FAULT = "CardNetworkUnhealthy"

V = TypeVar("V")

_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED = str.maketrans(_GO_ESCAPES)


def go_json(value: object) -> str:
    """``value`` as Go's ``json.Marshal`` writes it; mapping order is kept (struct fields in declaration
    order, map entries sorted: :func:`go_map`)."""
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


@dataclass(frozen=True)
class SuperPodPlace:
    """``SuperPodID``, ``ServerIndex`` and (in a 950 SuperPoD's rack) ``RackID`` of the node: -1 before the
    driver is asked and for its 0xffffffff ("none"), -2 when it cannot say."""

    super_pod_id: int
    server_index: int
    rack_id: int | None = None

    @classmethod
    def from_driver(cls, super_pod_id: int, server_id: int, rack_id: int | None = None) -> SuperPodPlace:
        """The driver's ``dcmi_spod_info`` fields (unsigned 32-bit) as Huawei writes them (int32)."""
        return cls(_int32(super_pod_id), _int32(server_id), rack_id)

    @classmethod
    def of(cls, info: SuperPodInfo | None) -> SuperPodPlace:
        """The place discovery read (None: not an A3 or 950, or the query failed on every chip: -2)."""
        if info is None:
            return UNAVAILABLE
        return cls.from_driver(info.super_pod_id, info.server_id, info.rack_id)


NOT_QUERIED = SuperPodPlace(-1, -1)
UNAVAILABLE = SuperPodPlace(-2, -2)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True)
class ChipReport:
    """What the device-info ConfigMap says of one chip."""

    name: str  # Huawei's device name, e.g. Ascend910-3
    phy_id: int
    healthy: bool  # as the kubelet is told
    network_healthy: bool = True
    recovering: bool = False  # being reset
    chip: FaultSide = field(default_factory=FaultSide)
    network: FaultSide = field(default_factory=FaultSide)

    @classmethod
    def judged(
        cls,
        name: str,
        phy_id: int,
        judgement: ChipJudgement,
        *,
        healthy: bool | None = None,
        recovering: bool = False,
    ) -> ChipReport:
        """A chip as the fault policy judged it; ``healthy`` overrides its health (a hung call ...)."""
        return cls(
            name,
            phy_id,
            judgement.healthy if healthy is None else healthy,
            judgement.network_healthy,
            recovering,
            judgement.chip,
            judgement.network,
        )


def fault_element(fault_type: str, name: str, side: FaultSide) -> dict[str, object]:
    """One ``DeviceFault`` of the ``-Fault`` list, fields in Huawei's struct order."""
    level = side.level.name
    return {
        "fault_type": fault_type,
        "npu_name": name,
        "large_model_fault_level": level,
        "fault_level": level,
        "fault_handling": level,
        "fault_code": ",".join(side.codes),
        "fault_time_and_level_map": go_map(
            {
                code: {"fault_time": time_and_level.fault_time, "fault_level": time_and_level.level.name}
                for code, time_and_level in side.times.items()
            }
        ),
    }


def fault_elements(report: ChipReport, network_keys: bool) -> list[dict[str, object]]:
    """The chip's ``-Fault`` elements: its network's, then its own; each with a code now or unhealthy
    (``network_keys``: the family lists network health)."""
    elements = []
    if report.network.present or (network_keys and not report.network_healthy):
        elements.append(fault_element(NETWORK_FAULT, report.name, report.network))
    if report.chip.present or not report.healthy:
        elements.append(fault_element(CHIP_FAULT, report.name, report.chip))
    return elements


@dataclass(frozen=True)
class DeviceInfoContent:
    """What the ConfigMap says, apart from its time stamp: a change here is worth a write."""

    device_list: Mapping[str, str]
    manually_separated: str
    upgrade_reasons: str = "{}"
    super_pod: SuperPodPlace = UNAVAILABLE

    def data(self, update_time: int) -> dict[str, str]:
        """The ConfigMap's data with ``update_time`` (Unix seconds) as UpdateTime."""
        device_info = {"DeviceList": go_map(self.device_list), "UpdateTime": update_time}
        document: dict[str, object] = {
            "DeviceInfo": device_info,
            "SuperPodID": self.super_pod.super_pod_id,
            "ServerIndex": self.super_pod.server_index,
            "CheckCode": check_code(device_info),
        }
        if self.super_pod.rack_id is not None:
            document["RackID"] = self.super_pod.rack_id
        return {
            DATA_KEY: go_json(document),
            MANUALLY_SEPARATED_KEY: self.manually_separated,
            UPGRADE_REASON_KEY: self.upgrade_reasons,
            DESCRIPTION_KEY: DESCRIPTION,
        }


_TIMES = re.compile(r'"(fault_time|upgrade_time)":-?\d+')


def without_times(content: DeviceInfoContent) -> DeviceInfoContent:
    """``content`` with the time of every fault and escalation zeroed: to tell a change of times alone."""
    device_list = {key: _TIMES.sub(r'"\1":0', value) for key, value in content.device_list.items()}
    return dataclasses.replace(
        content, device_list=device_list, upgrade_reasons=_TIMES.sub(r'"\1":0', content.upgrade_reasons)
    )


def build_device_info(
    reports: Sequence[ChipReport],
    table: FamilyTable,
    *,
    held: frozenset[int] = frozenset(),
    manually_separated: str = "",
    upgrade_reasons: str = "{}",
    super_pod: SuperPodPlace = UNAVAILABLE,
) -> DeviceInfoContent:
    """The device-info content for ``reports`` (in chip order); the free list leaves out ``held`` chips
    (only Volcano mode knows them, else Volcano subtracts what it placed)."""
    resource = table.resource_name

    def names(chosen: Callable[[ChipReport], bool]) -> str:
        # Sorted as Go sorts strings, bytewise: Ascend910-10 before Ascend910-2.
        return ",".join(sorted((report.name for report in reports if chosen(report)), key=str.encode))

    faults = [element for report in reports for element in fault_elements(report, table.network_keys)]
    device_list = {
        resource: names(lambda report: report.healthy and report.phy_id not in held),
        f"{resource}-Unhealthy": names(lambda report: not report.healthy),
        table.fault_key or f"{resource}-Fault": go_json(faults),
    }
    if table.network_keys:  # 910 families and 950 only
        device_list[f"{resource}-NetworkUnhealthy"] = names(lambda report: not report.network_healthy)
        device_list[f"{resource}-Recovering"] = names(lambda report: report.recovering)
    return DeviceInfoContent(device_list, manually_separated, upgrade_reasons, super_pod)


# -- ManuallySeparateNPU and UpgradeFaultReason -------------------------------------------


def device_names(prefix: str, phy_ids: Iterable[int]) -> str:
    """The ManuallySeparateNPU value for ``phy_ids``: ``Ascend910-0,Ascend910-3``."""
    return ",".join(f"{prefix}-{phy}" for phy in sorted(phy_ids))


def parse_device_names(text: str, prefix: str) -> tuple[list[int], list[str]]:
    """The physical IDs a ManuallySeparateNPU value names, and what in it was not a name of ours; spaces
    around a name are forgiven (an edit by hand that is not read would release a chip)."""
    pattern = re.compile(rf"{re.escape(prefix)}-(\d+)")
    phy_ids: list[int] = []
    problems: list[str] = []
    for item in text.split(","):
        name = item.strip()
        if not name:
            continue
        matched = pattern.fullmatch(name)
        if matched is None:
            problems.append(
                f"{MANUALLY_SEPARATED_KEY}: {name!r} is not a device name like '{prefix}-0'; ignored"
            )
        elif int(matched[1]) not in phy_ids:
            phy_ids.append(int(matched[1]))
    return phy_ids, problems


def encode_upgrade_reasons(reasons: Mapping[int, Sequence[UpgradeReason]], prefix: str) -> str:
    """The UpgradeFaultReason value: the Go JSON of {device name: [reason, ...]}."""
    document = {
        f"{prefix}-{phy}": [
            {
                "upgrade_time": reason.upgrade_time,
                "fault_code": reason.fault_code,
                "fault_level": reason.level.name,
                "upgrade_type": reason.kind.value,
            }
            for reason in chip_reasons
        ]
        for phy, chip_reasons in reasons.items()
        if chip_reasons
    }
    return go_json(go_map(document))


def decode_upgrade_reasons(text: str, prefix: str) -> tuple[dict[int, list[UpgradeReason]], list[str]]:
    """The reasons an UpgradeFaultReason value records per physical ID, and what was skipped: a malformed
    entry is skipped alone, since each reason read back keeps a chip escalated."""
    try:
        document = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as error:
        return {}, [f"{UPGRADE_REASON_KEY} is not valid JSON ({error}); no reasons are read back"]
    if not isinstance(document, dict):
        return {}, [f"{UPGRADE_REASON_KEY} must be a JSON object of device name -> reasons"]
    pattern = re.compile(rf"{re.escape(prefix)}-(\d+)")
    reasons: dict[int, list[UpgradeReason]] = {}
    problems: list[str] = []
    for name, items in document.items():
        matched = pattern.fullmatch(name)
        if matched is None or not isinstance(items, list):
            problems.append(
                f"{UPGRADE_REASON_KEY}: entry {name!r} is not '{prefix}-<id>': [reasons]; skipped"
            )
            continue
        for item in items:
            reason = _reason(item)
            if reason is None:
                problems.append(f"{UPGRADE_REASON_KEY}: {name}: {json.dumps(item)} is not a reason; skipped")
            else:
                reasons.setdefault(int(matched[1]), []).append(reason)
    return reasons, problems


def _reason(item: object) -> UpgradeReason | None:
    if not isinstance(item, dict):
        return None
    upgrade_time, code = item.get("upgrade_time"), item.get("fault_code")
    level = FaultLevel.__members__.get(str(item.get("fault_level")))
    kind = {kind.value: kind for kind in UpgradeKind}.get(str(item.get("upgrade_type")))
    if isinstance(upgrade_time, bool) or not isinstance(upgrade_time, int) or not isinstance(code, str):
        return None
    return None if level is None or kind is None else UpgradeReason(code, level, kind, upgrade_time)


# -- one chip's report: the fault policy's judgement, else the health verdict's view --------


@dataclass(frozen=True)
class ChipView:
    """One chip and its verdict under the name Huawei's objects use (``Ascend310-0``), not as offered."""

    id: str
    state: ChipState


def chip_views(inventory: Inventory) -> list[ChipView]:
    return [ChipView(inventory.table.chip_id(state.phy_id), state) for state in inventory.chips()]


class FaultClock:
    """When each current fault code of each chip the fault policy has not judged was first seen (Unix ms):
    DCMI does not say when a fault was raised. A code that clears is forgotten, as in Huawei's plugin."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._first_seen: dict[tuple[str, int], int] = {}

    def observe(self, devices: Iterable[ChipView]) -> Mapping[tuple[str, int], int]:
        """Record the faults of ``devices``; (device ID, code) -> first-seen time of each current one."""
        now = int(self.clock() * 1000)
        current = {(device.id, fault.code) for device in devices for fault in device.state.health.faults}
        self._first_seen = {key: self._first_seen.get(key, now) for key in current}
        return dict(self._first_seen)


def chip_report(device: ChipView, first_seen: Mapping[tuple[str, int], int]) -> ChipReport:
    """What the ConfigMap says of ``device``: as the fault policy judged it (its health as the kubelet is
    told), or, without a judgement (never read, a hung call), its verdict's faults timed by ``first_seen``."""
    state = device.state
    judgement = state.health.judgement
    if judgement is not None:
        return ChipReport.judged(
            device.id, state.phy_id, judgement, healthy=state.healthy, recovering=state.resetting
        )
    times = {
        format_code(fault.code): CodeTime(first_seen[device.id, fault.code], fault.level)
        for fault in state.health.faults
    }
    side = FaultSide(state.health.worst_level, tuple(times), MappingProxyType(times), len(times))
    return ChipReport(device.id, state.phy_id, state.healthy, recovering=state.resetting, chip=side)
