"""A chip's NUMA node, as Huawei's plugin finds it: the node whose cpulist is the chip's CPU affinity.

Else the PCIe device's ``numa_node``; both read the host's files under ``root`` (docs/how-it-works.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from backends.library import PcieAddress
from backends.pci import numa_node

NODES: Final = Path("sys/devices/system/node")
_NODE = re.compile(r"^node(?P<number>\d+)$")
_READ_LIMIT: Final = 10 * 1024  # bytes of a cpulist file read, as Huawei's plugin limits it


def node_cpulists(root: Path = Path("/")) -> dict[str, int]:
    """Each NUMA node's cpulist text (trimmed) -> its number; empty where the host has no such files.

    A node whose file cannot be read is left out: its chips fall back to their PCIe device.
    """
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

    Raises :class:`~backends.pci.PciSysfsError` when the PCIe device's file is unreadable.
    """
    if affinity is not None and affinity.strip() in cpulists:
        return cpulists[affinity.strip()]
    if address is None:
        return None
    return numa_node(address, root)
