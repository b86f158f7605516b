"""Host facts DCMI does not give about a chip, from the host's files under ``root``: NUMA node, PCIe root.

A chip's NUMA node is Huawei's: the node whose cpulist is the chip's CPU
affinity, else its PCIe device's ``numa_node`` (docs/how-it-works.md "NUMA").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from backends.errors import ChipError
from backends.library import PcieAddress

# Where the kernel lists every PCI function, one symbolic link per address.
PCI_DEVICES: Final = Path("sys/bus/pci/devices")

_BDF = re.compile(
    r"^(?P<domain>[0-9a-fA-F]{4}):(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})\.(?P<function>[0-7])$"
)
# A root complex's directory under /sys/devices: "pci" + domain + ":" + root bus.
_ROOT = re.compile(r"^pci(?P<domain>[0-9a-f]{4}):(?P<bus>[0-9a-f]{2})$")


class InvalidPciAddress(ChipError):
    """A text that is not a PCI address in the sysfs form ``DDDD:BB:DD.F``."""


class PciSysfsError(ChipError):
    """A sysfs file of a PCI device that exists but cannot be read or makes no sense."""


def parse_bdf(text: str) -> PcieAddress:
    """``0000:3b:00.0`` -> PcieAddress; device 0-31 and function 0-7, as PCI allows."""
    found = _BDF.match(text)
    if found is None or int(found["device"], 16) > 31:
        raise InvalidPciAddress(
            f"PCI address {text!r} is not of the form DDDD:BB:DD.F (hex domain, bus and device 00-1f, "
            "function 0-7), e.g. '0000:3b:00.0'"
        )
    return PcieAddress(
        domain=int(found["domain"], 16),
        bus=int(found["bus"], 16),
        device=int(found["device"], 16),
        function=int(found["function"]),
    )


def numa_node(address: PcieAddress, root: Path = Path("/")) -> int | None:
    """The NUMA node the kernel gives the device, from ``<root>/sys/bus/pci/devices/<bdf>/numa_node``. None
    when the file is missing (no such device, no sysfs) or says -1 (the kernel knows no node: single-node
    machines, some firmware)."""
    path = root / PCI_DEVICES / address.bdf / "numa_node"
    try:
        content = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise PciSysfsError(f"cannot read {path}: {error}") from error
    try:
        node = int(content)
    except ValueError:
        raise PciSysfsError(f"{path} holds {content!r}, not a NUMA node number (or -1)") from None
    return node if node >= 0 else None


def pcie_root(address: PcieAddress, root: Path = Path("/")) -> str:
    """The ``resource.kubernetes.io/pcieRoot`` value: ``pci<domain>:<bus>`` of the device's root complex.
    Read from the ``pciDDDD:BB`` directory under ``/sys/devices`` that the device's sysfs link leads to
    (inside ``root``, no other link followed); where the link leads nowhere recognisable, the device's own
    domain and bus stand in."""
    try:
        target = os.readlink(root / PCI_DEVICES / address.bdf)
    except OSError:
        target = ""
    # The link's place relative to the root: an absolute target already is; a
    # relative one starts from the link's directory.
    place = target.lstrip("/") if os.path.isabs(target) else str(PCI_DEVICES / target)
    parts = Path(os.path.normpath(place)).parts
    found = _ROOT.match(parts[2]) if target and len(parts) > 2 and parts[:2] == ("sys", "devices") else None
    if found is not None:
        return f"pci{found['domain']}:{found['bus']}"
    return f"pci{address.domain:04x}:{address.bus:02x}"


NODES: Final = Path("sys/devices/system/node")
_NODE = re.compile(r"^node(?P<number>\d+)$")
_READ_LIMIT: Final = 10 * 1024  # bytes of a cpulist file read, as Huawei's plugin limits it


def node_cpulists(root: Path = Path("/")) -> dict[str, int]:
    """Each NUMA node's cpulist text (trimmed) -> its number; empty where the host has no such files. A
    node whose file cannot be read is left out: its chips fall back to their PCIe device."""
    try:
        entries = sorted((root / NODES).iterdir())
    except OSError:
        return {}
    found: dict[str, int] = {}
    for entry in entries:
        matched = _NODE.match(entry.name)
        if matched is None:
            continue
        try:
            with (entry / "cpulist").open("rb") as file:
                text = file.read(_READ_LIMIT).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            found.setdefault(text, int(matched["number"]))
    return found


def chip_numa_node(
    affinity: str | None, address: PcieAddress | None, cpulists: Mapping[str, int], root: Path = Path("/")
) -> int | None:
    """The chip's NUMA node: its CPU affinity's node, else its PCIe device's; None when neither says.
    Raises :class:`~backends.pci.PciSysfsError` when the PCIe device's file is unreadable."""
    if affinity is not None and affinity.strip() in cpulists:
        return cpulists[affinity.strip()]
    if address is None:
        return None
    return numa_node(address, root)
