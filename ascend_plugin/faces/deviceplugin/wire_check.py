"""A request's protobuf bytes, checked against what a kubelet can send, before anything decodes them.

betterproto2 decodes in pure Python, field by field: 10,000 device IDs take it
60 ms of event loop, a 4 MB message of one-byte IDs 9 s. The kubelet never
sends more entries in a repeated field than the resource has devices, nor a
device ID longer than Huawei's 50 characters, so this walk over the wire
format refuses such a request at its first excess, having looked at no more
than that many fields, and also refuses bytes that are not protobuf at all
(a truncated field, an impossible wire type) with the byte offset. What it
lets through is small enough to decode in well under a millisecond per
device.

Fields a newer kubelet may add are skipped, as protobuf requires, but they
count: at most :data:`MAX_UNKNOWN_FIELDS` of them and :data:`MAX_UNKNOWN_BYTES`
in all, so they cannot be the way around the bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    Empty,
    PreferredAllocationRequest,
    PreStartContainerRequest,
)

# Huawei's plugin refuses longer device IDs; ours are far shorter (Ascend910-15).
MAX_REQUEST_ID_LENGTH = 50
MAX_UNKNOWN_FIELDS = 64
MAX_UNKNOWN_BYTES = 64 * 1024
_MAX_VARINT_BYTES = 10


class WireType(IntEnum):
    """Protobuf wire types (3 and 4, the deprecated groups, are refused like the undefined 6 and 7)."""

    VARINT = 0
    FIXED64 = 1
    LENGTH_DELIMITED = 2
    FIXED32 = 5


_FIXED_SIZE = {WireType.FIXED64: 8, WireType.FIXED32: 4}


@dataclass(frozen=True)
class FieldShape:
    """One field of a request: a device ID, a nested message or a number, possibly repeated."""

    name: str
    wire: WireType
    repeated: bool = False
    message: MessageShape | None = None  # a nested message
    device_id: bool = False  # a string holding a device ID


@dataclass(frozen=True)
class MessageShape:
    """The fields of one request message, by field number."""

    name: str
    fields: Mapping[int, FieldShape] = field(default_factory=dict)


def _ids(name: str) -> FieldShape:
    return FieldShape(name, WireType.LENGTH_DELIMITED, repeated=True, device_id=True)


_CONTAINER_ALLOCATE = MessageShape("ContainerAllocateRequest", {1: _ids("devices_ids")})
_CONTAINER_PREFERRED = MessageShape(
    "ContainerPreferredAllocationRequest",
    {
        1: _ids("available_deviceIDs"),
        2: _ids("must_include_deviceIDs"),
        3: FieldShape("allocation_size", WireType.VARINT),
    },
)

# Every request message the DevicePlugin service receives.
REQUEST_SHAPES: Mapping[type, MessageShape] = {
    Empty: MessageShape("Empty"),
    AllocateRequest: MessageShape(
        "AllocateRequest",
        {
            1: FieldShape(
                "container_requests", WireType.LENGTH_DELIMITED, repeated=True, message=_CONTAINER_ALLOCATE
            )
        },
    ),
    PreferredAllocationRequest: MessageShape(
        "PreferredAllocationRequest",
        {
            1: FieldShape(
                "container_requests", WireType.LENGTH_DELIMITED, repeated=True, message=_CONTAINER_PREFERRED
            )
        },
    ),
    PreStartContainerRequest: MessageShape("PreStartContainerRequest", {1: _ids("devices_ids")}),
}


@dataclass(frozen=True)
class RequestLimits:
    """What one request to a resource's socket may hold: no repeated field beyond its device count."""

    devices: int
    resource: str


class RequestRefused(Exception):
    """The bytes are not a request a kubelet could send; ``reason`` says where and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def check_request(data: bytes, shape: MessageShape, limits: RequestLimits) -> None:
    """Raise RequestRefused naming the first thing in ``data`` a kubelet would not send."""
    _Walk(memoryview(data), limits).message(shape, 0, len(data), shape.name)


@dataclass
class _Walk:
    data: memoryview
    limits: RequestLimits
    unknown_fields: int = 0
    unknown_bytes: int = 0

    def message(self, shape: MessageShape, pos: int, end: int, path: str) -> None:
        counts: dict[int, int] = {}
        while pos < end:
            at = pos
            tag, pos = self._varint(pos, end, path)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise RequestRefused(f"{path} is malformed: field number 0 at byte {at}")
            try:
                wire_type = WireType(wire)
            except ValueError:
                raise RequestRefused(
                    f"{path} is malformed: field {number} has wire type {wire} at byte {at}"
                ) from None
            start, pos = self._value(wire_type, pos, end, path, number)
            known = shape.fields.get(number)
            if known is None:
                self._unknown(pos - at, path, number)
                continue
            if wire_type is not known.wire:
                raise RequestRefused(
                    f"{path}.{known.name} is malformed: wire type {wire} at byte {at}, "
                    f"expected {int(known.wire)}"
                )
            name = f"{path}.{known.name}"
            if known.repeated:
                count = counts[number] = counts.get(number, 0) + 1
                if count > self.limits.devices:
                    raise RequestRefused(
                        f"{name} has more entries than the {self.limits.devices} "
                        f"{self.limits.resource} device(s) on this node"
                    )
                name = f"{name}[{count - 1}]"
            if known.device_id:
                self._device_id(start, pos, name)
            elif known.message is not None:
                self.message(known.message, start, pos, name)

    def _value(self, wire: WireType, pos: int, end: int, path: str, number: int) -> tuple[int, int]:
        """(where the value starts, where the next field starts)."""
        if wire is WireType.VARINT:
            _, after = self._varint(pos, end, path)
            return pos, after
        if wire is WireType.LENGTH_DELIMITED:
            length, start = self._varint(pos, end, path)
            size = length
        else:
            start, size = pos, _FIXED_SIZE[wire]
        if size > end - start:
            raise RequestRefused(
                f"{path} is malformed: field {number} at byte {pos} claims {size} bytes, "
                f"{end - start} are left"
            )
        return start, start + size

    def _varint(self, pos: int, end: int, path: str) -> tuple[int, int]:
        value = shift = 0
        for offset in range(_MAX_VARINT_BYTES):
            if pos + offset >= end:
                raise RequestRefused(f"{path} is malformed: a number runs past the end at byte {pos}")
            byte = self.data[pos + offset]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos + offset + 1
            shift += 7
        raise RequestRefused(f"{path} is malformed: a number longer than 10 bytes at byte {pos}")

    def _device_id(self, start: int, end: int, name: str) -> None:
        if end - start > MAX_REQUEST_ID_LENGTH:
            preview = bytes(self.data[start : start + 20]).decode("utf-8", "replace")
            raise RequestRefused(
                f"{name} ({preview!r}...) is {end - start} bytes long; device IDs have at most "
                f"{MAX_REQUEST_ID_LENGTH} characters"
            )
        raw = bytes(self.data[start:end])
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RequestRefused(f"{name} is malformed: not UTF-8 ({raw!r})") from None

    def _unknown(self, size: int, path: str, number: int) -> None:
        self.unknown_fields += 1
        self.unknown_bytes += size
        if self.unknown_fields > MAX_UNKNOWN_FIELDS or self.unknown_bytes > MAX_UNKNOWN_BYTES:
            raise RequestRefused(
                f"{path} carries more fields this plugin does not know (field {number}) than a kubelet "
                f"sends: {self.unknown_fields} fields, {self.unknown_bytes} bytes "
                f"(at most {MAX_UNKNOWN_FIELDS} fields and {MAX_UNKNOWN_BYTES} bytes)"
            )
