"""CDI mode: the node's Container Device Interface spec, and the device names Allocate hands out.

The spec has a device per offered device name (``huawei.com/npu=<phy>``) and spec-wide edits with the
shared nodes and driver mounts; rewritten when the offers change. The DRA driver's spec per claim is made
with the same :func:`spec_content` and :func:`write_spec`. Each spec declares the lowest ``cdiVersion``
its content needs (:func:`versioned`, as ``MinimumRequiredVersion`` of
tags.cncf.io/container-device-interface): runtimes refuse versions they do not know. A field not known
here is a ValueError: it needs its rule.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from ascend_plugin.files import write_atomically
from ascend_plugin.handover.host_devices import HostDevices, HostMount
from ascend_plugin.offers.base import DeviceNode, OfferedDevice
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.path_facts import create_failure
from ascend_plugin.resilience import Backoff, Retrier

log = logging.getLogger(__name__)

ANNOTATION_PREFIX: Final = "cdi.k8s.io/ascend-device-plugin_"
# Retrying a spec that cannot be written: a directory mounted late is found within half a minute.
WRITE_BACKOFF: Final = Backoff(0.5, 30.0)


def _node(node: DeviceNode) -> dict[str, Any]:
    return {"path": node.container_path, "hostPath": node.host_path, "permissions": node.permissions}


def _mount(mount: HostMount) -> dict[str, Any]:
    options = ["ro", "nosuid", "nodev", "bind"] if mount.read_only else ["nosuid", "nodev", "bind"]
    return {"hostPath": mount.host_path, "containerPath": mount.container_path, "options": options}


def spec_content(kind: str, nodes: Mapping[str, DeviceNode], host: HostDevices) -> dict[str, Any]:
    """A spec of ``kind``: a device per name of ``nodes``, the host's shared nodes, mounts and environment
    spec-wide (applied whenever any device is used), the lowest version this content allows."""
    edits: dict[str, Any] = {
        "deviceNodes": [_node(node) for node in host.shared],
        "mounts": [_mount(mount) for mount in host.mounts],
    }
    if host.env:
        edits["env"] = [f"{name}={value}" for name, value in host.env.items()]
    spec = {
        "kind": kind,
        "devices": [
            {"name": name, "containerEdits": {"deviceNodes": [_node(node)]}} for name, node in nodes.items()
        ],
        "containerEdits": edits,
    }
    return versioned(spec)


def write_spec(path: Path, content: Mapping[str, Any]) -> None:
    """Write a spec atomically: a runtime reading the directory never sees half a file."""
    write_atomically(path, json.dumps(content, indent=2) + "\n")


class CdiSpec:
    """The node's CDI spec: what it says, where it lives, the names it hands out."""

    def __init__(
        self, kind: str, spec_dir: Path, host: HostDevices, backoff: Backoff = WRITE_BACKOFF
    ) -> None:
        self.kind = kind
        self.path = spec_dir / f"{kind.replace('/', '-')}.json"
        self.host = host
        self._retry = Retrier(f"CDI spec {self.path}", backoff, logger=log)

    @property
    def problem(self) -> str:
        return self._retry.problem

    def qualified(self, name: str) -> str:
        """The fully qualified CDI device name, ``<kind>=<name>``."""
        return f"{self.kind}={name}"

    @staticmethod
    def annotation_key(device_id: str) -> str:
        """The annotation older kubelets hand to the runtime for a container's CDI devices."""
        return ANNOTATION_PREFIX + device_id

    def content(self, devices: Sequence[OfferedDevice]) -> dict[str, Any]:
        return spec_content(self.kind, {device.cdi_name: device.node for device in devices}, self.host)

    def problems(self) -> list[str]:
        """Why the spec on disk may not be what Allocate hands out names of; empty once it is written."""
        return [self.problem] if self.problem else []

    async def keep_written(self, book: OfferBook) -> None:
        """Write the spec now and on every change, until the inventory closes; a failure is said once, kept
        for /readyz and tried again with backoff (the kubelet side still serves)."""
        written: dict[str, Any] | None = None
        version = -1
        while not book.inventory.closed:
            devices = [device for devices in book.resources().values() for device in devices]
            content = self.content(devices)
            if content != written:
                try:
                    self.write(devices)
                except OSError as error:
                    delay = self._failed(error)
                    with anyio.move_on_after(delay):
                        version = await book.wait_for_change(version)
                    continue
                if attempts := self._retry.succeeded():
                    log.info(
                        "the CDI spec %s can be written again after %d failed attempt(s)", self.path, attempts
                    )
                written = content
                log.info("wrote the CDI spec", extra={"path": str(self.path), "kind": self.kind})
            version = await book.wait_for_change(version)

    def _failed(self, error: OSError) -> float:
        """Say a failed write (once; the same failure again only at DEBUG); the delay before the next."""
        where = Path(error.filename) if error.filename else self.path
        problem = f"cannot write the CDI spec {self.path}: {create_failure(where, error)}"
        return self._retry.failure(
            problem,
            said=f"{problem}; containers given NPUs will not start until it exists. Mount the runtime's CDI "
            "directory (/var/run/cdi) writable, or set cdi_spec_dir",
            path=str(self.path),
        )

    def write(self, devices: Sequence[OfferedDevice]) -> None:
        write_spec(self.path, self.content(devices))


# -- the lowest CDI version a spec's content needs ------------------------------------------------

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
