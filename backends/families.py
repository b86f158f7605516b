"""The chip families as data: one row per family, and how a chip name picks a row.

Everything that differs between 310, 310B, 310P and 910 nodes is a field of
:class:`FamilyTable`: names the cluster already uses, AI-core bounds, the
device nodes a container needs, the host files the driver reads, whether the
driver delivers fault events. Adding a family is one more row in
:data:`FAMILIES` (and its tests); nothing else branches on the family.

Detection follows Huawei's order (310P, then 310B, then 310, then 910), because
a "310B1" also contains "310" and a "310P3" too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from backends.errors import UnknownChipFamily
from backends.library import ChipInfo


@dataclass(frozen=True)
class HostFile:
    """A file of the host that the driver's user space reads, and what it is for."""

    path: str
    role: str


@dataclass(frozen=True)
class FamilyTable:
    """Everything that differs between chip families, as data.

    Fields an operator may change are overridden from settings (and so from
    the Helm values of a family) with :meth:`with_overrides`.
    """

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
    shared_nodes: tuple[str, ...] = ("/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist")
    # Host paths mounted read-only in device mode when they exist.
    driver_mounts: tuple[str, ...] = ("/usr/local/Ascend/driver",)
    # Extra environment in Ascend-Docker-Runtime mode.
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    # Whether the driver delivers fault events (dcmi_subscribe_fault_event).
    fault_subscription: bool = False
    # Host files the driver reads (the chart mounts them; the doctor checks them).
    host_files: tuple[HostFile, ...] = ()
    # Entries of the host's /dev/shm that show the driver's daemons are reachable.
    shm_markers: tuple[str, ...] = ()
    # Whether the driver lets several containers open one chip (its device-share
    # mode): the share_count setting offers each chip that many times.
    device_share: bool = False
    # Whether chips can carry static vNPUs (npu-smi set -t create-vnpu), read through VDEV_MNG.
    static_vnpus: bool = False

    def claims(self, info: ChipInfo) -> bool:
        """True when a chip with this info belongs to the family."""
        return bool(self.chip_names.search(info.chip_name))

    def chip_id(self, phy_id: int) -> str:
        """The kubelet's (and Huawei's) name for a whole chip, e.g. ``Ascend310-0``."""
        return f"{self.device_id_prefix}-{phy_id}"

    def ai_cores_in_bounds(self, value: float) -> bool:
        """True when an AI-core figure lies within the family's plausible bounds."""
        return self.ai_core_min <= value <= self.ai_core_max

    def with_overrides(self, **overrides: object) -> FamilyTable:
        """A copy with every non-None override applied."""
        chosen = {key: value for key, value in overrides.items() if value is not None}
        return dataclasses.replace(self, **chosen)  # type: ignore[arg-type]


_DEFAULT_SHARED = ("/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist")

# The 310B SoC's media and system nodes, each handed over when present.
_310B_EXTRA_NODES = (
    "/dev/pngd", "/dev/venc", "/dev/upgrade", "/dev/sys", "/dev/svm0", "/dev/vdec", "/dev/vpc",
    "/dev/ts_aisle", "/dev/log_drv", "/dev/acodec", "/dev/ai", "/dev/ao", "/dev/vo", "/dev/hdmi",
)  # fmt: skip

# On 310B boards the driver runs on the SoC and DCMI talks to the board's daemons.
_310B_HOST_FILES = (
    HostFile("/etc/hdcBasic.cfg", "HDC's configuration; without it HDC, and so DCMI, fails to initialise"),
    HostFile("/etc/sys_version.conf", "the board's system version, read by the driver"),
    HostFile("/etc/ascend_install.info", "where the driver is installed, read by the driver"),
    HostFile("/var/slogd", "the driver's log daemon, an executable"),
    HostFile("/var/dmp_daemon", "the device-management daemon, an executable"),
    HostFile("/var/queue_schedule", "the queue scheduler, an executable"),
)

ASCEND_310P = FamilyTable(
    # Atlas 300I Pro / Duo / 300V cards: 310P1, 310P3 (China edition: I2).
    family="310P",
    chip_names=re.compile(r"^(310P\d?|I2\d?)"),
    resource_name="huawei.com/Ascend310P",
    device_id_prefix="Ascend310P",
    accelerator_label="huawei-Ascend310P",
    ai_core_min=8,
    ai_core_max=10,
    ai_core_nominal=8,
    device_share=True,
    static_vnpus=True,
)

ASCEND_310B = FamilyTable(
    # Atlas 200I A2 / 200I DK A2 / 500 A2 boards: one 310B1 or 310B4 SoC with one AI
    # core. Huawei reports 310B as 310, so existing pods ask for huawei.com/Ascend310.
    family="310B",
    chip_names=re.compile(r"310B"),
    resource_name="huawei.com/Ascend310",
    device_id_prefix="Ascend310",
    accelerator_label="huawei-Ascend310",
    ai_core_min=1,
    ai_core_max=1,
    ai_core_nominal=1,
    manager_nodes=("/dev/davinci_manager_docker", "/dev/davinci_manager"),
    shared_nodes=_DEFAULT_SHARED + _310B_EXTRA_NODES,
    runtime_env=MappingProxyType({"ASCEND_ALLOW_LINK": "True"}),
    host_files=_310B_HOST_FILES,
    # Where dmp_daemon keeps its message files; DCMI finds them only in the host's /dev/shm.
    shm_markers=("/dev/shm/dmp", "/dev/shm/iam"),
    device_share=True,
)

ASCEND_310 = FamilyTable(
    # Atlas 300I (model 3000/3010) cards: four Ascend 310 chips each.
    family="310",
    chip_names=re.compile(r"310"),
    resource_name="huawei.com/Ascend310",
    device_id_prefix="Ascend310",
    accelerator_label="huawei-Ascend310",
    ai_core_min=2,
    ai_core_max=2,
    ai_core_nominal=2,
)

ASCEND_910 = FamilyTable(
    # Training chips: 910 (A1), 910B1-4 / A2Gx (A2), Ascend910 93xx (A3).
    family="910",
    chip_names=re.compile(r"^(910|A2G\d|Ascend910)"),
    resource_name="huawei.com/Ascend910",
    device_id_prefix="Ascend910",
    accelerator_label="huawei-Ascend910",
    ai_core_min=20,
    ai_core_max=32,
    ai_core_nominal=20,
    fault_subscription=True,
    static_vnpus=True,
)

# Detection order matters: see the module docstring.
FAMILIES: tuple[FamilyTable, ...] = (ASCEND_310P, ASCEND_310B, ASCEND_310, ASCEND_910)

FAMILY_NAMES: tuple[str, ...] = tuple(table.family for table in FAMILIES)


def family_for(info: ChipInfo, families: tuple[FamilyTable, ...] = FAMILIES) -> FamilyTable:
    """The family a chip belongs to, from its chip name."""
    for table in families:
        if table.claims(info):
            return table
    raise UnknownChipFamily(info.chip_name)


def family_named(name: str, families: tuple[FamilyTable, ...] = FAMILIES) -> FamilyTable:
    """The family called ``name`` ("310", "310B", "310P" or "910"), case-insensitively."""
    for table in families:
        if table.family.lower() == name.lower():
            return table
    raise ValueError(
        f"unknown chip family {name!r}; allowed: {', '.join(table.family for table in families)}"
    )
