"""The node's chips as ResourceSlice devices: names, attributes, capacity, taints; split into slices.

Every chip is one device, ``npu-<physical id>``, described by what users select
with CEL and what ``matchAttribute`` constraints compare (attribute names are
unprefixed, so they belong to the driver's domain):

* ``family`` ("910"), ``chipName`` ("910B3"), ``aiCores`` (int), ``phyID``,
  ``cardID``, ``deviceID`` (DCMI's address), ``driverVersion``;
* the topology unit the chip shares a fast link with: ``topologyUnit``
  ("ring-1", "card-3", "mesh-0": one value per unit, for ``matchAttribute``),
  ``topologyKind`` ("ring", "card", "mesh") and ``topologyUnitSize``;
* ``numaNode`` where the host says, and the standard
  ``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/pciBusID``
  where the driver gives a PCIe address;
* capacity ``memory``: the chip's HBM or DDR from DCMI, where known.

What does not change while the plugin runs is worked out once per chip
(:class:`DeviceCatalog`); health decides, at each publication, whether a chip
is in the slice (the default: unhealthy chips leave) or in it with a taint. A
chip split into static vNPUs is never published whole (a pod given it would
share the silicon with the vNPUs' pods), and one whose vNPUs could not be read
yet counts as unhealthy, as for the device plugin. A string longer than the
API allows is cut to size, with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascend_plugin.faces.dra.names import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_PER_SLICE_WITH_TAINTS,
    MAX_STRING_VALUE,
    checked_attribute_name,
    device_name,
)
from ascend_plugin.faces.dra.taints import taint_of
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubeapi.client import JsonObject
from backends.pci import pcie_root

log = logging.getLogger(__name__)

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_quantity(mib: int) -> str:
    """``mib`` MiB as the API server writes the quantity back: the largest binary suffix that keeps it whole.

    (65536 MiB is stored as ``64Gi``; publishing ``65536Mi`` would differ from
    the stored slice at every comparison and rewrite it forever.)
    """
    value, suffix = mib * 1024 * 1024, 0
    while value and value % 1024 == 0 and suffix < len(_BINARY_SUFFIXES) - 1:
        value //= 1024
        suffix += 1
    return f"{value}{_BINARY_SUFFIXES[suffix]}"


def _string(name: str, value: str, phy: int) -> JsonObject:
    if len(value) > MAX_STRING_VALUE:
        log.warning(
            "attribute %s of chip %d is %d characters, more than the API's %d; publishing its start: %r",
            name,
            phy,
            len(value),
            MAX_STRING_VALUE,
            value[:MAX_STRING_VALUE],
            extra={"chip": phy, "attribute": name},
        )
        value = value[:MAX_STRING_VALUE]
    return {"string": value}


@dataclass(frozen=True)
class CatalogEntry:
    """One chip's device, without its health: name, attributes and capacity."""

    phy_id: int
    name: str
    attributes: Mapping[str, JsonObject]
    capacity: Mapping[str, JsonObject]


class DeviceCatalog:
    """The node's chips as devices; their health is read from the inventory at each publication."""

    def __init__(self, inventory: Inventory, driver: str, host_root: Path = Path("/")) -> None:
        self.inventory = inventory
        self.driver = driver
        self.entries: dict[int, CatalogEntry] = {
            state.phy_id: self._entry(state, host_root) for state in inventory.chips()
        }

    def _entry(self, state: ChipState, host_root: Path) -> CatalogEntry:
        chip, phy = state.chip, state.phy_id
        facts = self.inventory.facts
        attributes: dict[str, JsonObject] = {
            "family": _string("family", facts.table.family, phy),
            "chipName": _string("chipName", chip.info.chip_name, phy),
            "phyID": {"int": phy},
            "cardID": {"int": chip.card_id},
            "deviceID": {"int": chip.device_id},
        }
        if state.ai_cores is not None:
            attributes["aiCores"] = {"int": round(state.ai_cores)}
        if facts.driver_version:
            attributes["driverVersion"] = _string("driverVersion", facts.driver_version, phy)
        if state.unit is not None:
            unit = state.unit
            attributes["topologyUnit"] = {"string": f"{unit.kind.value}-{unit.index}"}
            attributes["topologyKind"] = {"string": unit.kind.value}
            attributes["topologyUnitSize"] = {"int": unit.size}
        if state.numa_node is not None:
            attributes["numaNode"] = {"int": state.numa_node}
        if state.pcie_address is not None:
            attributes[PCIE_ROOT] = {"string": pcie_root(state.pcie_address, host_root)}
            attributes[PCI_BUS_ID] = {"string": state.pcie_address.bdf}
        capacity: dict[str, JsonObject] = {}
        if state.memory_mb is not None:
            capacity["memory"] = {"value": binary_quantity(state.memory_mb)}
        for name in attributes:
            checked_attribute_name(name)
        assert len(attributes) + len(capacity) <= MAX_ATTRIBUTES_AND_CAPACITIES  # fixed by the code above
        return CatalogEntry(phy, device_name(phy), attributes, capacity)

    def devices(self, *, tainted: bool) -> list[JsonObject]:
        """The devices to publish now, by physical id.

        ``tainted`` False: the healthy chips only. True: every chip, the
        unhealthy ones with their taint.
        """
        devices = []
        for state in self.inventory.chips():
            if state.split:
                continue
            taint = taint_of(state, self.driver)
            if taint is not None and not tainted:
                continue
            entry = self.entries[state.phy_id]
            device: JsonObject = {"name": entry.name, "attributes": dict(entry.attributes)}
            if entry.capacity:
                device["capacity"] = dict(entry.capacity)
            if taint is not None:
                device["taints"] = [taint]
            devices.append(device)
        return devices


def split(devices: Sequence[JsonObject]) -> list[list[JsonObject]]:
    """The devices in slices the API accepts: 128 each, 64 once any device carries a taint.

    A pool without a device is still one (empty) slice, so the pool and its
    generation stay visible.
    """
    limit = (
        MAX_DEVICES_PER_SLICE_WITH_TAINTS
        if any(device.get("taints") for device in devices)
        else MAX_DEVICES_PER_SLICE
    )
    chunks = [list(devices[start : start + limit]) for start in range(0, len(devices), limit)]
    return chunks or [[]]
