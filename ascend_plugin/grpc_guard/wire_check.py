"""A request's protobuf bytes, checked against what a kubelet can send, before anything decodes them.

betterproto2 decodes in pure Python (10,000 device IDs take 60 ms of event loop), so each service
describes its requests as data (a :class:`MessageShape` per type) and this walk refuses a request at
its first excess: more entries than an :class:`EntryLimit`, a string over its :class:`TextLimit` or
not UTF-8, a field a kubelet always sends missing, bytes that are not protobuf (named with the offset).
Fields a newer kubelet may add are skipped, within :data:`MAX_UNKNOWN_FIELDS` and :data:`MAX_UNKNOWN_BYTES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from ascend_plugin.grpc_guard.refusals import BadRequest

MAX_UNKNOWN_FIELDS = 64
MAX_UNKNOWN_BYTES = 64 * 1024
_MAX_VARINT_BYTES = 10
_PREVIEW = 20  # characters of an over-long string a refusal shows


class WireType(IntEnum):
    """Protobuf wire types (3 and 4, the deprecated groups, are refused like the undefined 6 and 7)."""

    VARINT = 0
    FIXED64 = 1
    LENGTH_DELIMITED = 2
    FIXED32 = 5


_FIXED_SIZE = {WireType.FIXED64: 8, WireType.FIXED32: 4}


@dataclass(frozen=True)
class TextLimit:
    """How long a string field may be: ``what`` names its values in a refusal ("device IDs")."""

    what: str
    max_length: int
    why: str = ""  # where the bound comes from, e.g. " (a DNS subdomain)"

    def rule(self) -> str:
        return f"{self.what} have at most {self.max_length} characters{self.why}"


@dataclass(frozen=True)
class EntryLimit:
    """How many entries a repeated field may have; ``than`` ends the refusal ("the 8 ... devices")."""

    count: int
    than: str


# A request's bounds by name: the service decides them per request (a resource's device count changes).
RequestLimits = Mapping[str, EntryLimit]


@dataclass(frozen=True)
class FieldShape:
    """One field of a request: a string, a nested message or a number, possibly repeated."""

    name: str
    wire: WireType
    entries: str = ""  # the name of its EntryLimit: set for a repeated field, empty otherwise
    message: MessageShape | None = None  # a nested message
    text: TextLimit | None = None  # a string
    required: bool = False  # a kubelet always sends it, non-empty

    @property
    def repeated(self) -> bool:
        return bool(self.entries)


@dataclass(frozen=True)
class MessageShape:
    """The fields of one request message, by field number."""

    name: str
    fields: Mapping[int, FieldShape] = field(default_factory=dict)


def text_field(name: str, limit: TextLimit, *, entries: str = "", required: bool = False) -> FieldShape:
    """A string field (repeated when ``entries`` names its bound)."""
    return FieldShape(name, WireType.LENGTH_DELIMITED, entries=entries, text=limit, required=required)


def number_field(name: str) -> FieldShape:
    """A varint field: a number or a bool."""
    return FieldShape(name, WireType.VARINT)


def message_field(name: str, shape: MessageShape, *, entries: str = "", required: bool = False) -> FieldShape:
    """A nested message field (repeated when ``entries`` names its bound)."""
    return FieldShape(name, WireType.LENGTH_DELIMITED, entries=entries, message=shape, required=required)


def limit_names(shapes: Mapping[type, MessageShape]) -> set[str]:
    """Every EntryLimit name the shapes refer to: what a service's RequestLimits must hold."""
    names: set[str] = set()
    pending = list(shapes.values())
    while pending:
        shape = pending.pop()
        for known in shape.fields.values():
            if known.entries:
                names.add(known.entries)
            if known.message is not None:
                pending.append(known.message)
    return names


def _refused(reason: str) -> BadRequest:
    """Bytes that are not a request a kubelet could send; ``reason`` says where and why."""
    return BadRequest("shape", reason)


def check_request(data: bytes, shape: MessageShape, limits: RequestLimits) -> None:
    """Raise BadRequest (label ``shape``) naming the first thing in ``data`` a kubelet would not send."""
    _Walk(memoryview(data), limits).message(shape, 0, len(data), shape.name)


@dataclass
class _Walk:
    data: memoryview
    limits: RequestLimits
    unknown_fields: int = 0
    unknown_bytes: int = 0

    def message(self, shape: MessageShape, pos: int, end: int, path: str) -> None:
        counts: dict[int, int] = {}
        present: set[int] = set()  # fields seen with a value (an empty string is none)
        while pos < end:
            at = pos
            tag, pos = self._varint(pos, end, path)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise _refused(f"{path} is malformed: field number 0 at byte {at}")
            try:
                wire_type = WireType(wire)
            except ValueError:
                raise _refused(
                    f"{path} is malformed: field {number} has wire type {wire} at byte {at}"
                ) from None
            start, pos = self._value(wire_type, pos, end, path, number)
            known = shape.fields.get(number)
            if known is None:
                self._unknown(pos - at, path, number)
                continue
            if wire_type is not known.wire:
                raise _refused(
                    f"{path}.{known.name} is malformed: wire type {wire} at byte {at}, "
                    f"expected {int(known.wire)}"
                )
            name = f"{path}.{known.name}"
            if known.repeated:
                count = counts[number] = counts.get(number, 0) + 1
                limit = self.limits[known.entries]
                if count > limit.count:
                    raise _refused(f"{name} has more entries than {limit.than}")
                name = f"{name}[{count - 1}]"
            if known.text is not None:
                self._text(start, pos, name, known.text)
            elif known.message is not None:
                self.message(known.message, start, pos, name)
            if pos > start or known.message is not None:
                present.add(number)
        for number, known in shape.fields.items():
            if known.required and number not in present:
                what = "names no entry" if known.repeated else "is missing or empty"
                raise _refused(f"{path}.{known.name} {what}; a kubelet always sends it")

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
            raise _refused(
                f"{path} is malformed: field {number} at byte {pos} claims {size} bytes, "
                f"{end - start} are left"
            )
        return start, start + size

    def _varint(self, pos: int, end: int, path: str) -> tuple[int, int]:
        value = shift = 0
        for offset in range(_MAX_VARINT_BYTES):
            if pos + offset >= end:
                raise _refused(f"{path} is malformed: a number runs past the end at byte {pos}")
            byte = self.data[pos + offset]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos + offset + 1
            shift += 7
        raise _refused(f"{path} is malformed: a number longer than 10 bytes at byte {pos}")

    def _text(self, start: int, end: int, name: str, limit: TextLimit) -> None:
        if end - start > limit.max_length:
            preview = bytes(self.data[start : start + _PREVIEW]).decode("utf-8", "replace")
            raise _refused(f"{name} ({preview!r}...) is {end - start} bytes long; {limit.rule()}")
        try:
            bytes(self.data[start:end]).decode("utf-8")
        except UnicodeDecodeError:
            shown = bytes(self.data[start : min(end, start + _PREVIEW)])
            more = "..." if end - start > _PREVIEW else ""
            raise _refused(f"{name} is malformed: not UTF-8 ({shown!r}{more})") from None

    def _unknown(self, size: int, path: str, number: int) -> None:
        self.unknown_fields += 1
        self.unknown_bytes += size
        if self.unknown_fields > MAX_UNKNOWN_FIELDS or self.unknown_bytes > MAX_UNKNOWN_BYTES:
            raise _refused(
                f"{path} carries more fields this plugin does not know (field {number}) than a kubelet "
                f"sends: {self.unknown_fields} fields, {self.unknown_bytes} bytes "
                f"(at most {MAX_UNKNOWN_FIELDS} fields and {MAX_UNKNOWN_BYTES} bytes)"
            )
