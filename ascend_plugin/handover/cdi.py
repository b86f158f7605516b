"""CDI mode: the node's Container Device Interface spec, and the device names Allocate hands out.

The container runtime edits the container from the spec: a device per offered
device name (``huawei.com/npu=<phy>``) carrying its node, and spec-wide edits
with the family's shared nodes and the driver mounts. Rewritten when the offers
change, retried with backoff. Allocate names the devices both as ``cdi_devices``
and as the ``cdi.k8s.io/`` annotation older kubelets pass on. The DRA driver's
spec per claim is made with the same :func:`spec_content` and :func:`write_spec`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from ascend_plugin.files import write_atomically
from ascend_plugin.handover.cdi_version import versioned
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
    """A spec of ``kind``: a device per name of ``nodes``, the host's shared nodes and mounts spec-wide
    (applied whenever any device is used), the lowest version this content allows."""
    spec = {
        "kind": kind,
        "devices": [
            {"name": name, "containerEdits": {"deviceNodes": [_node(node)]}} for name, node in nodes.items()
        ],
        "containerEdits": {
            "deviceNodes": [_node(node) for node in host.shared],
            "mounts": [_mount(mount) for mount in host.mounts],
        },
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
        """Why the last write failed, until one succeeds."""
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
