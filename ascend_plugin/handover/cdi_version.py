"""The lowest CDI version a spec's content needs, by the reference library's rules.

A runtime refuses a whole spec whose ``cdiVersion`` it does not know (podman
4.3 and containerd 1.7.0-1.7.11 know nothing above 0.5.0), and the newer ones
also refuse a spec whose version is below what its content needs. So the spec
says the lowest version its content allows: computed here from the content,
rule for rule as ``MinimumRequiredVersion`` of the reference Go library
(tags.cncf.io/container-device-interface, ``specs-go/version.go``), where each
version names the fields it introduced:

* 1.1.0: ``netDevices``; ``intelRdt`` with ``schemata`` or ``enableMonitoring``
* 0.7.0: ``intelRdt``; a non-empty ``additionalGids``
* 0.6.0: non-empty ``annotations`` on the spec or a device; a dot in the
  class of the kind (the part after the first ``/``)
* 0.5.0: a device name starting with a digit; a device node with ``hostPath``
* 0.4.0: a mount with ``type``
* else 0.3.0, the earliest version the library accepts.

The content is the mapping written as JSON (the spec's camelCase keys). A key
this module does not know raises :class:`CdiContentError`: a field added to the
spec later must come with its rule, or its version could come out too low.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

EARLIEST: Final = "0.3.0"

# The fields of each object CDI defines (specs-go/config.go), by JSON name.
_SPEC_KEYS: Final = frozenset({"cdiVersion", "kind", "annotations", "devices", "containerEdits"})
_DEVICE_KEYS: Final = frozenset({"name", "annotations", "containerEdits"})
_EDIT_KEYS: Final = frozenset(
    {"env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt", "additionalGids"}
)
_NODE_KEYS: Final = frozenset(
    {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
)
_MOUNT_KEYS: Final = frozenset({"hostPath", "containerPath", "options", "type"})
_HOOK_KEYS: Final = frozenset({"hookName", "path", "args", "env", "timeout"})
_RDT_KEYS: Final = frozenset({"closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring"})
_NET_DEVICE_KEYS: Final = frozenset({"hostInterfaceName", "name"})


class CdiContentError(ValueError):
    """The content is not a CDI spec this module can version."""


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CdiContentError(f"CDI spec: {where} must be an object, got {value!r}")
    return value


def _items(value: object, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise CdiContentError(f"CDI spec: {where} must be a list, got {value!r}")
    return value


def _known(value: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise CdiContentError(
            f"CDI spec: {where} has unknown field(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _objects(value: object, allowed: frozenset[str], where: str) -> list[Mapping[str, Any]]:
    entries = [_mapping(item, f"{where}[{index}]") for index, item in enumerate(_items(value, where))]
    for index, entry in enumerate(entries):
        _known(entry, allowed, f"{where}[{index}]")
    return entries


class _Content:
    """The spec, checked for known fields, flattened into what the rules look at."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        _known(_mapping(spec, "the spec"), _SPEC_KEYS, "the spec")
        kind = spec.get("kind")
        if not isinstance(kind, str):
            raise CdiContentError(f"CDI spec: kind must be a string, got {kind!r}")
        self.kind = kind
        self.names: list[str] = []
        self.annotations: list[Mapping[str, Any]] = []
        self.edits: list[Mapping[str, Any]] = []
        self.nodes: list[Mapping[str, Any]] = []
        self.mounts: list[Mapping[str, Any]] = []
        self._add_annotations(spec.get("annotations"), "annotations")
        for index, device in enumerate(_objects(spec.get("devices"), _DEVICE_KEYS, "devices")):
            name = device.get("name")
            if not isinstance(name, str):
                raise CdiContentError(f"CDI spec: devices[{index}].name must be a string, got {name!r}")
            self.names.append(name)
            self._add_annotations(device.get("annotations"), f"devices[{index}].annotations")
            self._add_edits(device.get("containerEdits"), f"devices[{index}].containerEdits")
        self._add_edits(spec.get("containerEdits"), "containerEdits")

    def _add_annotations(self, value: object, where: str) -> None:
        if value is not None:
            self.annotations.append(_mapping(value, where))

    def _add_edits(self, value: object, where: str) -> None:
        if value is None:
            return
        edits = _mapping(value, where)
        _known(edits, _EDIT_KEYS, where)
        _items(edits.get("additionalGids"), f"{where}.additionalGids")
        _objects(edits.get("hooks"), _HOOK_KEYS, f"{where}.hooks")
        _objects(edits.get("netDevices"), _NET_DEVICE_KEYS, f"{where}.netDevices")
        rdt = edits.get("intelRdt")
        if rdt is not None:
            _known(_mapping(rdt, f"{where}.intelRdt"), _RDT_KEYS, f"{where}.intelRdt")
        self.edits.append(edits)
        self.nodes.extend(_objects(edits.get("deviceNodes"), _NODE_KEYS, f"{where}.deviceNodes"))
        self.mounts.extend(_objects(edits.get("mounts"), _MOUNT_KEYS, f"{where}.mounts"))


def _requires_1_1_0(content: _Content) -> bool:
    for edits in content.edits:
        rdt = edits.get("intelRdt")
        if rdt is not None and (rdt.get("schemata") is not None or bool(rdt.get("enableMonitoring"))):
            return True
        if edits.get("netDevices"):
            return True
    return False


def _requires_0_7_0(content: _Content) -> bool:
    return any(edits.get("intelRdt") is not None or edits.get("additionalGids") for edits in content.edits)


def _requires_0_6_0(content: _Content) -> bool:
    _, slash, kind_class = content.kind.partition("/")
    return any(content.annotations) or (bool(slash) and "." in kind_class)


def _requires_0_5_0(content: _Content) -> bool:
    return any("0" <= name[:1] <= "9" for name in content.names) or any(
        node.get("hostPath") for node in content.nodes
    )


def _requires_0_4_0(content: _Content) -> bool:
    return any(mount.get("type") for mount in content.mounts)


# Newest first: the first rule that holds decides.
_RULES: Final[tuple[tuple[str, Callable[[_Content], bool]], ...]] = (
    ("1.1.0", _requires_1_1_0),
    ("0.7.0", _requires_0_7_0),
    ("0.6.0", _requires_0_6_0),
    ("0.5.0", _requires_0_5_0),
    ("0.4.0", _requires_0_4_0),
)


def minimum_version(spec: Mapping[str, Any]) -> str:
    """The lowest ``cdiVersion`` that ``spec`` (the JSON content) may declare."""
    content = _Content(spec)
    return next((version for version, required in _RULES if required(content)), EARLIEST)


def versioned(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with ``cdiVersion`` first, set to the lowest version its content needs."""
    body = {key: value for key, value in spec.items() if key != "cdiVersion"}
    return {"cdiVersion": minimum_version(body), **body}
