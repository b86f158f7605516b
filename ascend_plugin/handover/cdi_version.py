"""The lowest CDI version a spec's content needs, rule for rule as the reference library computes it.

``MinimumRequiredVersion`` of tags.cncf.io/container-device-interface: a runtime
refuses a ``cdiVersion`` it does not know (podman 4.3, containerd up to 1.7.11
know nothing above 0.5.0), newer ones a version below what the content needs.
A field this module does not know is a ValueError: a new field
must come with its rule, or its version could come out too low.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"CDI spec: {where} must be an object, got {value!r}")
    return value


def _items(value: object, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError(f"CDI spec: {where} must be a list, got {value!r}")
    return value


def _known(value: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValueError(
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
            raise ValueError(f"CDI spec: kind must be a string, got {kind!r}")
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
                raise ValueError(f"CDI spec: devices[{index}].name must be a string, got {name!r}")
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

    def minimum(self) -> str:
        """The rules of each version, newest first: the first that holds decides."""
        rdts = [edits["intelRdt"] for edits in self.edits if edits.get("intelRdt") is not None]
        _, slash, kind_class = self.kind.partition("/")
        if any(rdt.get("schemata") is not None or rdt.get("enableMonitoring") for rdt in rdts) or any(
            edits.get("netDevices") for edits in self.edits
        ):
            return "1.1.0"
        if rdts or any(edits.get("additionalGids") for edits in self.edits):
            return "0.7.0"
        if any(self.annotations) or (slash and "." in kind_class):
            return "0.6.0"
        if any("0" <= name[:1] <= "9" for name in self.names) or any(
            node.get("hostPath") for node in self.nodes
        ):
            return "0.5.0"
        if any(mount.get("type") for mount in self.mounts):
            return "0.4.0"
        return EARLIEST


def minimum_version(spec: Mapping[str, Any]) -> str:
    """The lowest ``cdiVersion`` that ``spec`` (the JSON content) may declare."""
    return _Content(spec).minimum()


def versioned(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with ``cdiVersion`` first, set to the lowest version its content needs."""
    body = {key: value for key, value in spec.items() if key != "cdiVersion"}
    return {"cdiVersion": minimum_version(body), **body}
