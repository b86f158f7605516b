"""A chip family's facts as data: the row every family's backend carries (names, bounds, nodes, host files).

What a family's chips *do* differently is not here but in its :class:`~backends.backend.ChipBackend`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from backends.chips import Chip
from backends.library import ChipInfo, SuperPodInfo

# Shared nodes every family hands over when they exist on the host.
DEFAULT_SHARED_NODES = ("/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist")

# The node labels Huawei's plugin writes on a 950 node beside the common ones.
CHIP_MEMORY_LABEL = "mind-cluster/npu-chip-memory"
SUPER_POD_LABEL = "huawei.com/topotree.superpodid"
RACK_LABEL = "huawei.com/topotree.rackid"
SERVER_LABEL = "huawei.com/topotree.serverid"


@dataclass(frozen=True)
class HostFile:
    """A file of the host that the driver's user space reads, and what it is for."""

    path: str
    role: str


@dataclass(frozen=True)
class FamilyTable:
    """A family's names, bounds, device nodes and host files; what an operator may change is overridden
    with :meth:`with_overrides`."""

    family: str
    chip_names: re.Pattern[str]  # dcmi_chip_info.chip_name values this family claims
    resource_name: str
    device_id_prefix: str
    accelerator_label: str
    ai_core_min: float
    ai_core_max: float
    ai_core_nominal: float
    # Candidates for the manager node, best first; the first that exists on the
    # host is mapped to /dev/davinci_manager in the container.
    manager_nodes: tuple[str, ...] = ("/dev/davinci_manager",)
    # Shared nodes added (same path inside) when they exist on the host.
    shared_nodes: tuple[str, ...] = DEFAULT_SHARED_NODES
    # Host paths mounted read-only in device mode when they exist.
    driver_mounts: tuple[str, ...] = ("/usr/local/Ascend/driver",)
    # Extra environment in Ascend-Docker-Runtime mode.
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    # Host files the driver reads (the chart mounts them; the doctor checks them).
    host_files: tuple[HostFile, ...] = ()
    # Entries of the host's /dev/shm that show the driver's daemons are reachable.
    shm_markers: tuple[str, ...] = ()
    # Directories whose every entry a container gets too, when the host has them (950: the UB stack's).
    shared_node_dirs: tuple[str, ...] = ()
    # /dev/davinci<N> and ASCEND_VISIBLE_DEVICES count chips by logical id (the 950), not physical id.
    nodes_by_logic_id: bool = False
    # The device-info ConfigMap lists <resource>-NetworkUnhealthy and -Recovering (910 generations, 950).
    network_keys: bool = False
    # The device-info ConfigMap's key of the chips' faults, where Huawei's is not <resource>-Fault.
    fault_key: str = ""
    # The servertype label, <prefix>-<AI cores>: Huawei's prefix (default Ascend<family>), and whether
    # Huawei overwrites a value someone else set (950) or sets it only while the node has none.
    server_type_prefix: str = ""
    server_type_enforced: bool = False
    # Extended resources a node of this family no longer has, left over from an older family's plugin
    # (Huawei removes huawei.com/Ascend910 from a 950 node's status at start).
    stale_resources: tuple[str, ...] = ()
    # The node carries Huawei's 950 labels: its chips' memory and its place in a super pod (topotree).
    topology_labels: bool = False
    # The driver's topology file HCCL reads (HCCL_TOPO_FILE_PATH), by the node's super_pod_type (950).
    topology_files: Mapping[int, str] = field(default_factory=dict)

    def claims(self, info: ChipInfo) -> bool:
        return bool(self.chip_names.search(info.chip_name))

    def chip_id(self, phy_id: int) -> str:
        """The kubelet's (and Huawei's) name for a whole chip, e.g. ``Ascend310-0``."""
        return f"{self.device_id_prefix}-{phy_id}"

    def device_number(self, chip: Chip) -> int:
        """The N of the chip's ``/dev/davinci<N>`` and of ``ASCEND_VISIBLE_DEVICES``."""
        return chip.logic_id if self.nodes_by_logic_id else chip.phy_id

    def server_type(self, ai_cores: str) -> str:
        """The ``servertype`` label's value: ``Ascend310P-8``, ``npu-32``."""
        return f"{self.server_type_prefix or f'Ascend{self.family}'}-{ai_cores}"

    def topology_labels_of(self, memory_mb: int | None, super_pod: SuperPodInfo | None) -> dict[str, str]:
        """Huawei's 950 labels: chip memory in whole GiB, super pod, rack (1D/2D pods), server, if known."""
        if not self.topology_labels:
            return {}
        labels = {CHIP_MEMORY_LABEL: f"{memory_mb // 1024}G"} if memory_mb else {}
        if super_pod is not None:
            place = {
                SUPER_POD_LABEL: super_pod.super_pod_id,
                RACK_LABEL: super_pod.rack_id,
                SERVER_LABEL: super_pod.server_id,
            }
            labels |= {key: str(value) for key, value in place.items() if value is not None and value >= 0}
        return labels

    def topology_file(self, super_pod: SuperPodInfo | None) -> tuple[str | None, str]:
        """The driver's topology file of the node's product, or None and why not (empty: not this family's
        concern)."""
        if not self.topology_files:
            return None, ""
        if super_pod is None:
            return None, "no chip could say the node's super_pod_type (its product)"
        path = self.topology_files.get(super_pod.super_pod_type)
        if path is None:
            known = ", ".join(str(kind) for kind in sorted(self.topology_files))
            return None, f"super_pod_type {super_pod.super_pod_type} names no product with one ({known} do)"
        return path, ""

    def ai_cores_in_bounds(self, value: float) -> bool:
        """True when an AI-core figure lies within the family's plausible bounds."""
        return self.ai_core_min <= value <= self.ai_core_max

    def with_overrides(self, **overrides: object) -> FamilyTable:
        chosen = {key: value for key, value in overrides.items() if value is not None}
        return dataclasses.replace(self, **chosen)  # type: ignore[arg-type]
