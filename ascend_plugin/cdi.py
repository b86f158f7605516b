"""CDI mode: describe the NPUs in a Container Device Interface spec, hand out names.

With CDI the container runtime (containerd, CRI-O, podman) edits the container
itself from a spec file, so neither the Ascend Docker Runtime nor a list of
device nodes in every Allocate answer is needed. The plugin writes one spec
for the node when it starts serving: a device per chip (``huawei.com/npu=<phy>``)
carrying its ``/dev/davinci<phy>``, and spec-wide edits carrying the family's
shared nodes and the read-only driver mounts, which apply whenever any of its
devices is used. Allocate then answers with the fully qualified device names,
both as ``cdi_devices`` (kubelets with DevicePluginCDIDevices, GA in 1.31) and
as the ``cdi.k8s.io/`` annotation older kubelets pass to the runtime.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from ascend_plugin.cdi_version import versioned
from ascend_plugin.kubelet_api.v1beta1 import CdiDevice, ContainerAllocateResponse
from backends.base import Chip, ChipBackend, DeviceNode, HostMount

ANNOTATION_PREFIX: Final = "cdi.k8s.io/ascend-device-plugin_"


def _node(node: DeviceNode) -> dict[str, Any]:
    return {"path": node.container_path, "hostPath": node.host_path, "permissions": node.permissions}


def _mount(mount: HostMount) -> dict[str, Any]:
    options = ["ro", "nosuid", "nodev", "bind"] if mount.read_only else ["nosuid", "nodev", "bind"]
    return {"hostPath": mount.host_path, "containerPath": mount.container_path, "options": options}


class CdiSpec:
    """The node's CDI spec: what it says, where it lives, the names it hands out."""

    def __init__(
        self, kind: str, spec_dir: Path, backend: ChipBackend, chips: Sequence[Chip], host_root: Path
    ):
        self.kind = kind
        self.path = spec_dir / f"{kind.replace('/', '-')}.json"
        self.backend = backend
        self.chips = chips
        self.host_root = host_root

    def content(self) -> dict[str, Any]:
        """The spec as the runtime reads it (unknown fields would make it reject the file)."""
        spec = {
            "kind": self.kind,
            "devices": [
                {
                    "name": str(chip.phy_id),
                    "containerEdits": {
                        "deviceNodes": [_node(node) for node in self.backend.chip_nodes([chip.phy_id])]
                    },
                }
                for chip in self.chips
            ],
            "containerEdits": {
                "deviceNodes": [_node(node) for node in self.backend.shared_device_nodes(self.host_root)],
                "mounts": [_mount(mount) for mount in self.backend.driver_mounts(self.host_root)],
            },
        }
        return versioned(spec)  # the lowest cdiVersion this content allows

    def write(self) -> None:
        """Write the spec atomically: a runtime reading the directory never sees half a file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps(self.content(), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)

    def response(self, phy_ids: Sequence[int], device_ids: Sequence[str]) -> ContainerAllocateResponse:
        """The Allocate answer for a container holding these chips."""
        names = [f"{self.kind}={phy}" for phy in phy_ids]
        return ContainerAllocateResponse(
            cdi_devices=[CdiDevice(name=name) for name in names],
            annotations={ANNOTATION_PREFIX + device_ids[0]: ",".join(names)},
        )
