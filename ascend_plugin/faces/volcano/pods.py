"""A pod as Volcano mode reads it: the fields that decide a choice, and the annotations' names (Huawei's)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ascend_plugin.kubeapi.client import JsonObject, mapping_field, string_field, string_map

PREDICATE_TIME = "predicate-time"
# math.MaxUint64: the predicate-time of a pod whose chips were handed over (or that has none).
CONSUMED = 18446744073709551615
KUBELET_IDS = "huawei.com/kltDev"
ASCEND_REAL = "huawei.com/AscendReal"
RANK_TABLE = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
ADMISSION_FAILED = "UnexpectedAdmissionError"
PRESTART_FAILED = "PreStartContainer check failed"
MAX_ANNOTATION = 1024 * 1024  # longer values are not Volcano's: Huawei ignores them too

_QUANTITY = re.compile(r"^\+?([0-9]+)$")


def chips_of(value: str | None) -> tuple[str, ...] | None:
    """``"Ascend910-2,Ascend910-3"`` -> its device IDs; None when absent or unreasonably long."""
    if value is None or len(value) > MAX_ANNOTATION:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _count(quantity: object) -> int:
    """An extended resource's quantity (a whole number; the API writes it as a string)."""
    if isinstance(quantity, int) and not isinstance(quantity, bool):
        return quantity
    match = _QUANTITY.match(quantity) if isinstance(quantity, str) else None
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Pod:
    """What Volcano mode needs of one pod."""

    uid: str
    namespace: str
    name: str
    node_name: str
    phase: str
    deleting: bool
    reason: str  # status.reason, e.g. UnexpectedAdmissionError
    waiting_messages: tuple[str, ...]  # of containers waiting to start
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # summed over containers

    @property
    def key(self) -> str:
        """``namespace/name``, as messages name the pod."""
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        """Not finished: Pending and Running pods hold (or are about to hold) their chips."""
        return self.phase not in ("Succeeded", "Failed")

    @property
    def failed_admission(self) -> str:
        """Why the kubelet would never start this pod, if it says so; otherwise empty."""
        if self.reason == ADMISSION_FAILED:
            return f"its admission failed ({ADMISSION_FAILED})"
        if any(PRESTART_FAILED in message for message in self.waiting_messages):
            return f"a container is waiting with {PRESTART_FAILED!r}"
        return ""

    @property
    def predicate_time(self) -> int:
        """Volcano's predicate-time; CONSUMED when missing or not an unsigned 64-bit number."""
        value = self.annotations.get(PREDICATE_TIME, "")
        if not value.isdigit() or len(value) > 20 or int(value) > CONSUMED:
            return CONSUMED
        return int(value)

    def chosen(self, resource: str) -> tuple[str, ...] | None:
        """The chips Volcano chose for ``resource`` (its annotation of that name), if any."""
        return chips_of(self.annotations.get(resource))

    @property
    def real(self) -> tuple[str, ...] | None:
        """The chips the pod holds as written in ``huawei.com/AscendReal``, if written."""
        return chips_of(self.annotations.get(ASCEND_REAL))

    def with_annotations(self, annotations: Mapping[str, str]) -> Pod:
        """This pod with ``annotations`` set on top of its own."""
        return dataclasses.replace(self, annotations=MappingProxyType({**self.annotations, **annotations}))


def parse_pod(obj: JsonObject) -> Pod:
    """The pod in an API object (fields the pod lacks read as empty)."""
    metadata = mapping_field(obj, "metadata")
    spec = mapping_field(obj, "spec")
    status = mapping_field(obj, "status")
    limits: dict[str, int] = {}
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, dict):
            continue
        for resource, quantity in mapping_field(mapping_field(container, "resources"), "limits").items():
            limits[resource] = limits.get(resource, 0) + _count(quantity)
    waiting = []
    statuses = status.get("containerStatuses")
    for container_status in statuses if isinstance(statuses, list) else []:
        if isinstance(container_status, dict):
            state = mapping_field(mapping_field(container_status, "state"), "waiting")
            waiting.append(string_field(state, "message"))
    return Pod(
        uid=string_field(metadata, "uid"),
        namespace=string_field(metadata, "namespace"),
        name=string_field(metadata, "name"),
        node_name=string_field(spec, "nodeName"),
        phase=string_field(status, "phase") or "Pending",
        deleting=bool(metadata.get("deletionTimestamp")),
        reason=string_field(status, "reason"),
        waiting_messages=tuple(message for message in waiting if message),
        annotations=MappingProxyType(string_map(metadata, "annotations")),
        limits=MappingProxyType(limits),
    )
