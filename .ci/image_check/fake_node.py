"""A fake Atlas 200I A2 (one 310B1 chip) on the host, for the plugin and doctor in a container.

The host root holds what ``doctor --root`` checks on such a board, taken from
doctor's own tables: the six host files, dmp_daemon's /dev/shm entries, the
device nodes (character devices with /dev/null's numbers, so any runtime that
stats them takes them for real ones), the driver directory, and the kubelet's
device-plugin directory, where the kubelet stand-in listens.

The driver's library is the C fake libdcmi.so (tests/fake_dcmi), compiled for
the image's platform, in the driver directory as on servers and mounted
read-only where the chart mounts it: the plugin finds it by the image's
LD_LIBRARY_PATH, checks it is root's alone and loads it through the image's
cffi, exactly as it loads Huawei's. (A 310B board keeps it in /usr/lib64,
which an amd64 image cannot have mounted over: its dynamic loader lives
there.) The library reads its node from a scenario file in its own
directory, mounted whole: an edit replaces the file, which a single-file bind
mount would not show.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Final

from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

from backends.fake.scenario import FakeChip, FakeScenario
from backends.families import family_named
from image_check.platforms import Platform, Unavailable

FAMILY: Final = "310B"
RESOURCE: Final = "huawei.com/Ascend310"
DEVICE: Final = "Ascend310-0"
CDI_DEVICE: Final = "huawei.com/npu=0"
DEVICE_NODES: Final = ("/dev/davinci0", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm")
DRIVER: Final = "/usr/local/Ascend/driver"
LIBRARY: Final = f"{DRIVER}/lib64/driver/libdcmi.so"  # on the image's LD_LIBRARY_PATH
FAULT: Final = "80E01801"  # SeparateNPU: the chip must leave the allocatable set

# Where the chart mounts each in the plugin's container.
PLUGIN_DIR: Final = "/var/lib/kubelet/device-plugins"
HOST_ROOT: Final = "/host"
SCENARIO_DIR: Final = "/scenario"
CDI_DIR: Final = "/var/run/cdi"


class WrongArchitecture(RuntimeError):
    """The fake library came out for another machine than the image's."""


def elf_machine(path: Path) -> int:
    """e_machine of a little-endian ELF file."""
    with path.open("rb") as elf:
        header = elf.read(20)
    return int.from_bytes(header[18:20], "little")


def fake_library(target: Platform, native: bool) -> tuple[Path, str]:
    """The C fake libdcmi.so compiled for ``target``, and the compiler that did it.

    The native platform's with the tests' compiler ($CC, else cc), another's
    with Debian's cross compiler; a missing compiler is :class:`Unavailable`.
    """
    compiler = os.environ.get("CC", "cc") if native else f"{target.gnu_type}-gcc"
    if shutil.which(compiler) is None:
        package = "gcc" if native else target.cross_compiler_package
        raise Unavailable(
            f"the fake libdcmi.so for {target.name} needs {compiler} (apt-get install {package})"
        )
    built = build_fake_library(compiler=compiler)
    if elf_machine(built) != target.elf_machine:
        raise WrongArchitecture(
            f"{compiler} built {built} for ELF machine {elf_machine(built):#x}, not {target.machine} "
            f"({target.elf_machine:#x})"
        )
    return built, compiler


class FakeNode:
    """The board's host root with its driver library, its scenario and the directory the CDI spec goes to."""

    def __init__(self, top: Path, library: Path) -> None:
        self.library = library  # the fake libdcmi.so built for the image's platform
        self.root = top / "host"
        self.plugin_dir = self.host(PLUGIN_DIR)
        self.scenario_dir = top / "scenario"
        self.scenario = self.scenario_dir / "node.txt"
        self.cdi_dir = top / "cdi"

    def host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def build(self) -> None:
        for item in family_named(FAMILY).TABLE.host_files:
            self.host(item.path).parent.mkdir(parents=True, exist_ok=True)
            self.host(item.path).write_text("")
        for path in (*family_named(FAMILY).TABLE.shm_markers, DRIVER, PLUGIN_DIR):
            self.host(path).mkdir(parents=True, exist_ok=True)
        self.host(DRIVER).joinpath("version.info").write_text("Version=24.1.rc1\n")
        self.host(LIBRARY).parent.mkdir(parents=True)
        shutil.copyfile(self.library, self.host(LIBRARY))
        self.host(LIBRARY).chmod(0o755)
        null = os.stat("/dev/null").st_rdev
        for path in DEVICE_NODES:
            self.host(path).parent.mkdir(parents=True, exist_ok=True)
            os.mknod(self.host(path), 0o666 | stat.S_IFCHR, null)
        self.scenario_dir.mkdir()
        self.cdi_dir.mkdir()
        self.write_scenario([])

    def write_scenario(self, fault_codes: list[str]) -> None:
        """Replace the scenario atomically: the library never reads half a file."""
        chip = FakeChip(
            phy_id=0, card_id=0, device_id=0, fault_codes=tuple(int(code, 16) for code in fault_codes)
        )
        write_scenario(
            self.scenario, FakeScenario(chip_name="310B1", aicore=1.0, memory_mb=4096, chips=(chip,))
        )

    def _library_options(self) -> list[str]:
        """The driver directory, read-only as the chart mounts it, and the scenario the library plays."""
        volumes = _volumes((self.host(DRIVER), DRIVER, True), (self.scenario_dir, SCENARIO_DIR, True))
        return [*volumes, "-e", f"{SCENARIO_ENV}={SCENARIO_DIR}/{self.scenario.name}"]

    def plugin_options(self) -> list[str]:
        """The plugin's view of this node, as the chart gives it (spec directory included)."""
        own = _volumes(
            (self.plugin_dir, PLUGIN_DIR, False), (self.root, HOST_ROOT, True), (self.cdi_dir, CDI_DIR, False)
        )
        return [*own, *self._library_options()]

    def doctor_options(self) -> list[str]:
        """For ``doctor --root``: the host root read-only, the kubelet's directory writable."""
        own = _volumes((self.root, HOST_ROOT, True), (self.plugin_dir, f"{HOST_ROOT}{PLUGIN_DIR}", False))
        return [*own, *self._library_options()]


def _volumes(*mounts: tuple[Path, str, bool]) -> list[str]:
    """``-v host:inside[:ro]`` for each (host, inside, read-only) mount."""
    return [
        option for host, inside, ro in mounts for option in ("-v", f"{host}:{inside}{':ro' if ro else ''}")
    ]
