"""Ascend 310B: the Atlas 200I A2 / 200I DK A2 / 500 A2 boards, one 310B1 or 310B4 SoC with one AI core."""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import MappingProxyType
from typing import ClassVar

from backends.backend import ChipBackend
from backends.chips import Chip
from backends.family_table import DEFAULT_SHARED_NODES, FamilyTable, HostFile
from backends.topology import alone

# The SoC's media and system nodes, each handed over when present.
_EXTRA_NODES = (
    "/dev/pngd", "/dev/venc", "/dev/upgrade", "/dev/sys", "/dev/svm0", "/dev/vdec", "/dev/vpc",
    "/dev/ts_aisle", "/dev/log_drv", "/dev/acodec", "/dev/ai", "/dev/ao", "/dev/vo", "/dev/hdmi",
)  # fmt: skip

# The driver runs on the SoC and DCMI talks to the board's daemons.
_HOST_FILES = (
    HostFile("/etc/hdcBasic.cfg", "HDC's configuration; without it HDC, and so DCMI, fails to initialise"),
    HostFile("/etc/sys_version.conf", "the board's system version, read by the driver"),
    HostFile("/etc/ascend_install.info", "where the driver is installed, read by the driver"),
    HostFile("/var/slogd", "the driver's log daemon, an executable"),
    HostFile("/var/dmp_daemon", "the device-management daemon, an executable"),
    HostFile("/var/queue_schedule", "the queue scheduler, an executable"),
)

ASCEND_310B = FamilyTable(
    # Huawei reports 310B as 310, so existing pods ask for huawei.com/Ascend310.
    family="310B",
    chip_names=re.compile(r"310B"),
    resource_name="huawei.com/Ascend310",
    device_id_prefix="Ascend310",
    accelerator_label="huawei-Ascend310",
    fault_key="huawei.com/Ascend310P-Fault",  # Huawei's quirk: readers look there
    ai_core_min=1,
    ai_core_max=1,
    ai_core_nominal=1,
    manager_nodes=("/dev/davinci_manager_docker", "/dev/davinci_manager"),
    shared_nodes=DEFAULT_SHARED_NODES + _EXTRA_NODES,
    runtime_env=MappingProxyType({"ASCEND_ALLOW_LINK": "True"}),
    host_files=_HOST_FILES,
    # Where dmp_daemon keeps its message files; DCMI finds them only in the host's /dev/shm.
    shm_markers=("/dev/shm/dmp", "/dev/shm/iam"),
)


class Ascend310B(ChipBackend):
    """310B SoCs: DDR shared with the board's OS, polled for faults, one chip per board. Its driver's
    device-share mode lets several containers open the chip, so ``share_count`` applies; the board's only
    chip resets alone."""

    TABLE = ASCEND_310B
    shares_chips: ClassVar[bool] = True

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return alone(chip, chips)

    def card_count(self, chips: Sequence[Chip]) -> int | None:
        """None: npu-exporter shows no ``machine_card_nums`` for this family."""
        return None
