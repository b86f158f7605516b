"""backends.pci: PCI addresses parsed; a device's NUMA node and PCIe root read from sysfs under a root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from backends.library import PcieAddress
from backends.pci import PCI_DEVICES, InvalidPciAddress, PciSysfsError, numa_node, parse_bdf, pcie_root

NPU = PcieAddress(domain=0, bus=0x3B, device=0, function=0)


def _device(root: Path, address: PcieAddress, target: str, numa: str | None = None) -> None:
    """``<root>/sys/bus/pci/devices/<bdf>`` as the kernel makes it: a link to the device's topology path."""
    place = root / PCI_DEVICES / target if not target.startswith("/") else root / target.lstrip("/")
    place = Path(os.path.normpath(place))
    place.mkdir(parents=True)
    if numa is not None:
        (place / "numa_node").write_text(numa + "\n")
    link = root / PCI_DEVICES / address.bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("0000:3b:00.0", PcieAddress(0, 0x3B, 0, 0)),
        ("0000:C1:1F.7", PcieAddress(0, 0xC1, 0x1F, 7)),
        ("abcd:00:01.3", PcieAddress(0xABCD, 0, 1, 3)),
    ],
)
def test_addresses_parse_and_print_as_sysfs_names_them(text: str, address: PcieAddress) -> None:
    assert parse_bdf(text) == address
    assert parse_bdf(text).bdf == text.lower()


@pytest.mark.parametrize(
    "text", ["3b:00.0", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "0000:3g:00.0", ""]
)
def test_anything_else_is_refused_with_the_form_expected(text: str) -> None:
    with pytest.raises(InvalidPciAddress, match=r"is not of the form DDDD:BB:DD\.F"):
        parse_bdf(text)


def test_the_numa_node_the_kernel_gives(tmp_path: Path) -> None:
    _device(tmp_path, NPU, "../../../devices/pci0000:3a/0000:3a:02.0/0000:3b:00.0", numa="1")
    assert numa_node(NPU, tmp_path) == 1


def test_no_numa_node_when_the_kernel_knows_none_or_there_is_no_such_device(tmp_path: Path) -> None:
    _device(tmp_path, NPU, "../../../devices/pci0000:3a/0000:3a:02.0/0000:3b:00.0", numa="-1")
    assert numa_node(NPU, tmp_path) is None
    assert numa_node(PcieAddress(0, 0x81, 0, 0), tmp_path) is None


def test_a_numa_file_that_makes_no_sense_is_an_error_naming_it(tmp_path: Path) -> None:
    _device(tmp_path, NPU, "../../../devices/pci0000:3a/0000:3a:02.0/0000:3b:00.0", numa="node one")
    with pytest.raises(PciSysfsError, match=r"0000:3b:00\.0/numa_node holds 'node one'"):
        numa_node(NPU, tmp_path)


def test_the_pcie_root_is_the_root_complex_the_device_hangs_under(tmp_path: Path) -> None:
    # Behind a root port and a switch, as 910B NPUs sit in Atlas 800 servers.
    _device(tmp_path, NPU, "../../../devices/pci0000:3a/0000:3a:02.0/0000:3b:00.0")
    deep = PcieAddress(0x0001, 0xC2, 0, 0)
    _device(tmp_path, deep, "../../../devices/pci0001:c0/0001:c0:00.0/0001:c1:00.0/0001:c2:00.0")
    assert pcie_root(NPU, tmp_path) == "pci0000:3a"
    assert pcie_root(deep, tmp_path) == "pci0001:c0"


def test_an_absolute_link_counts_from_the_host_root(tmp_path: Path) -> None:
    _device(tmp_path, NPU, "/sys/devices/pci0000:17/0000:17:00.0/0000:3b:00.0")
    assert pcie_root(NPU, tmp_path) == "pci0000:17"


def test_without_sysfs_the_device_s_own_domain_and_bus_stand_in(tmp_path: Path) -> None:
    assert pcie_root(NPU, tmp_path) == "pci0000:3b"
    elsewhere = PcieAddress(0x0002, 0x81, 0, 0)
    _device(tmp_path, elsewhere, "../../../somewhere/else/0002:81:00.0")
    assert pcie_root(elsewhere, tmp_path) == "pci0002:81"


REAL_DEVICES = sorted(Path("/sys/bus/pci/devices").glob("*")) if Path("/sys/bus/pci/devices").is_dir() else []


@pytest.mark.skipif(not REAL_DEVICES, reason="this machine has no PCI devices in /sys/bus/pci/devices")
def test_on_this_machine_the_root_matches_the_kernel_s_own_path() -> None:
    for link in REAL_DEVICES:
        address = parse_bdf(link.name)
        top = Path(os.path.realpath(link)).relative_to("/sys/devices").parts[0]
        # A hypervisor's bus (Hyper-V's VMBus ...) is no root complex: the fallback then stands in.
        expected = top if re.match(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$", top) else f"pci{link.name[:7]}"
        assert pcie_root(address) == expected, link
        numa = (link / "numa_node").read_text().strip()
        assert numa_node(address) == (int(numa) if int(numa) >= 0 else None)
