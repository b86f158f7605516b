"""A fake Atlas 200I A2 (one 310B1 chip) on the host, for the plugin and doctor in a container.

The host root holds what ``doctor --root`` checks on such a board, taken from
doctor's own tables: the six host files, dmp_daemon's /dev/shm entries, the
device nodes (character devices with /dev/null's numbers, so any runtime that
stats them takes them for real ones), the driver directory, and the kubelet's
device-plugin directory, where the kubelet stand-in listens. The scenario of
the fake backend lives in its own directory, mounted whole: an edit replaces
the file, which a single-file bind mount would not show.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Final

from backends.families import family_named

FAMILY: Final = "310B"
RESOURCE: Final = "huawei.com/Ascend310"
DEVICE: Final = "Ascend310-0"
CDI_DEVICE: Final = "huawei.com/npu=0"
DEVICE_NODES: Final = ("/dev/davinci0", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm")
DRIVER: Final = "/usr/local/Ascend/driver"
FAULT: Final = "80E01801"  # SeparateNPU: the chip must leave the allocatable set

# Where the chart mounts each in the plugin's container.
PLUGIN_DIR: Final = "/var/lib/kubelet/device-plugins"
HOST_ROOT: Final = "/host"
SCENARIO_DIR: Final = "/scenario"
CDI_DIR: Final = "/var/run/cdi"


class FakeNode:
    """The board's host root, its scenario and the directory the CDI spec is written to."""

    def __init__(self, top: Path) -> None:
        self.root = top / "host"
        self.plugin_dir = self.host(PLUGIN_DIR)
        self.scenario_dir = top / "scenario"
        self.scenario = self.scenario_dir / "node.json"
        self.cdi_dir = top / "cdi"

    def host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def build(self) -> None:
        for item in family_named(FAMILY).host_files:
            self.host(item.path).parent.mkdir(parents=True, exist_ok=True)
            self.host(item.path).write_text("")
        for path in (*family_named(FAMILY).shm_markers, DRIVER, PLUGIN_DIR):
            self.host(path).mkdir(parents=True, exist_ok=True)
        self.host(DRIVER).joinpath("version.info").write_text("Version=24.1.rc1\n")
        null = os.stat("/dev/null").st_rdev
        for path in DEVICE_NODES:
            self.host(path).parent.mkdir(parents=True, exist_ok=True)
            os.mknod(self.host(path), 0o666 | stat.S_IFCHR, null)
        self.scenario_dir.mkdir()
        self.cdi_dir.mkdir()
        self.write_scenario([])

    def write_scenario(self, fault_codes: list[str]) -> None:
        """Replace the scenario atomically: the plugin never reads half a file."""
        scenario = {
            "chip_name": "310B1",
            "aicore": 1.0,
            "memory_mb": 4096,
            "chips": [{"phy_id": 0, "card_id": 0, "device_id": 0, "health": 0, "fault_codes": fault_codes}],
        }
        temporary = self.scenario.with_suffix(".tmp")
        temporary.write_text(json.dumps(scenario), encoding="utf-8")
        temporary.replace(self.scenario)

    def mounts(self) -> list[str]:
        """``-v`` options: the plugin's view of this node, as the chart gives it (spec directory included)."""
        return [
            "-v", f"{self.plugin_dir}:{PLUGIN_DIR}",
            "-v", f"{self.root}:{HOST_ROOT}:ro",
            "-v", f"{self.scenario_dir}:{SCENARIO_DIR}:ro",
            "-v", f"{self.cdi_dir}:{CDI_DIR}",
        ]  # fmt: skip

    def doctor_mounts(self) -> list[str]:
        """``-v`` options for ``doctor --root``: the host root read-only, the kubelet's directory writable."""
        return [
            "-v", f"{self.root}:{HOST_ROOT}:ro",
            "-v", f"{self.plugin_dir}:{HOST_ROOT}{PLUGIN_DIR}",
            "-v", f"{self.scenario_dir}:{SCENARIO_DIR}:ro",
        ]  # fmt: skip

    def backend_flags(self) -> list[str]:
        """The fake backend on this node's scenario, as the container sees it."""
        return ["--backend", "fake", "--fake-scenario", f"{SCENARIO_DIR}/{self.scenario.name}"]
