"""The node's chips as ResourceSlice devices: names, attributes, capacity, taints, counters, shares.

Every chip is one device, ``npu-<physical id>``, described by what users select
with CEL and what ``matchAttribute`` constraints compare (attribute names are
unprefixed, so they belong to the driver's domain):

* ``family`` ("910"), ``chipName`` ("910B3"), ``aiCores`` (int), ``phyID``,
  ``cardID``, ``deviceID`` (DCMI's address; on a 950, DCMI v2's ``logicID``),
  ``driverVersion``;
* the topology unit the chip shares a fast link with: ``topologyUnit``
  ("ring-1", "card-3", "mesh-0": one value per unit, for ``matchAttribute``),
  ``topologyKind`` ("ring", "card", "mesh") and ``topologyUnitSize``;
* ``numaNode`` where the host says, and the standard
  ``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/pciBusID``
  where the driver gives a PCIe address;
* capacity ``memory``: the chip's HBM or DDR from DCMI, where known.

With vNPUs made on demand (``vnpu=dynamic``) and a server that keeps counters,
a chip that can be split also has its counter set and partition devices
(:mod:`~ascend_plugin.faces.dra.partitions`), and its whole-chip device
consumes the whole set. With ``share_count`` N and a server that keeps
consumable capacity, a chip is one device that several claims can be
allocated (``allowMultipleAllocations``), each taking one of its N ``shares``
unless it asks for more; such a device says ``shareCount``.

What does not change while the plugin runs is worked out once per chip
(:class:`DeviceCatalog`); health decides, at each publication, whether a chip
(with its partitions) is in the slice (the default: unhealthy chips leave) or
in it with a taint. A chip split into static vNPUs is never published whole (a
pod given it would share the silicon with the vNPUs' pods), and one whose vNPUs
could not be read yet counts as unhealthy; a chip a device-plugin pod still
holds (a node moved from the device plugin) is left out, with its partitions,
until the pod is gone. A string longer than the API allows is cut to size, with
one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascend_plugin.faces.dra.names import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_STRING_VALUE,
    checked_attribute_name,
    device_name,
)
from ascend_plugin.faces.dra.partitions import consumption, counter_set, partition_attributes, partition_names
from ascend_plugin.faces.dra.quantities import binary_quantity
from ascend_plugin.faces.dra.taints import taint_of
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubeapi.client import JsonObject
from backends.chips import NO_CARD
from backends.pci import pcie_root
from backends.vnpu_split import ChipSplits, VnpuTemplate

log = logging.getLogger(__name__)

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
SHARES = "shares"  # the capacity a shared chip's claims take one of each (unless they ask for more)
SHARE_COUNT = "shareCount"  # the attribute saying a device is a shared chip, and into how many shares


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
    """One device, without its health: name, attributes and capacity; a partition names its template."""

    phy_id: int
    name: str
    attributes: Mapping[str, JsonObject]
    capacity: Mapping[str, JsonObject]
    template: VnpuTemplate | None = None


@dataclass(frozen=True)
class Publishing:
    """What a publication holds besides whole chips, as the settings ask and the API server keeps."""

    taints: bool = False  # unhealthy chips stay, tainted (else they leave)
    partitions: bool = False  # counter sets and partitions of the chips that can be split
    shares: bool = False  # each chip one device for several claims (share_count)


@dataclass(frozen=True)
class PoolDevices:
    """A publication: the counter sets, and the devices chip by chip (a chip's partitions follow it)."""

    counter_sets: list[JsonObject]
    chips: list[list[JsonObject]]

    @property
    def devices(self) -> list[JsonObject]:
        return [device for chip in self.chips for device in chip]


class DeviceCatalog:
    """The node's chips as devices; their health is read from the inventory at each publication.

    ``splits``: what each chip that can be split on demand splits into
    (``vnpu=dynamic``; chips missing from it are published whole only).
    ``share_count``: into how many shares a shared chip goes (1: not shared).
    ``evict``: taints of the levels that must stop work are ``NoExecute``.
    """

    def __init__(
        self,
        inventory: Inventory,
        driver: str,
        host_root: Path = Path("/"),
        *,
        splits: Mapping[int, ChipSplits] | None = None,
        share_count: int = 1,
        evict: bool = True,
    ) -> None:
        self.inventory = inventory
        self.driver = driver
        self.splits = dict(splits or {})
        self.share_count = share_count
        self.evict = evict
        self.entries: dict[int, CatalogEntry] = {
            state.phy_id: self._entry(state, host_root) for state in inventory.chips()
        }
        self.partitions: dict[int, tuple[CatalogEntry, ...]] = {
            phy: self._partitions(self.entries[phy], split) for phy, split in self.splits.items()
        }
        self._by_name = {
            entry.name: entry
            for entry in (*self.entries.values(), *(p for parts in self.partitions.values() for p in parts))
        }

    def names_of(self, state: ChipState) -> list[str]:
        """The devices a chip stands behind: itself and its partitions; none while static vNPUs split it."""
        parts = [part.name for part in self.partitions.get(state.phy_id, ())]
        if state.split and not parts:
            return []
        return [self.entries[state.phy_id].name, *parts]

    def find(self, name: str) -> CatalogEntry | None:
        """The device called ``name``: a whole chip, or a partition of one."""
        return self._by_name.get(name)

    def _entry(self, state: ChipState, host_root: Path) -> CatalogEntry:
        chip, phy = state.chip, state.phy_id
        facts = self.inventory.facts
        attributes: dict[str, JsonObject] = {
            "family": _string("family", facts.table.family, phy),
            "chipName": _string("chipName", chip.info.chip_name, phy),
            "phyID": {"int": phy},
        }
        if chip.card_id == NO_CARD:  # DCMI v2 (the 950) names a chip by its logical id alone
            attributes["logicID"] = {"int": chip.logic_id}
        else:
            attributes |= {"cardID": {"int": chip.card_id}, "deviceID": {"int": chip.device_id}}
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
        # Fixed by the code above, with room for a partition's template and a shared chip's count.
        assert len(attributes) + len(capacity) + 1 <= MAX_ATTRIBUTES_AND_CAPACITIES
        return CatalogEntry(phy, device_name(phy), attributes, capacity)

    @staticmethod
    def _partitions(chip: CatalogEntry, splits: ChipSplits) -> tuple[CatalogEntry, ...]:
        return tuple(
            CatalogEntry(
                chip.phy_id,
                name,
                partition_attributes(chip.attributes, template),
                {"memory": {"value": binary_quantity(template.memory_mb)}},
                template,
            )
            for name, template in partition_names(chip.phy_id, splits)
        )

    def pool(self, publishing: Publishing = Publishing(), withheld: Collection[int] = ()) -> PoolDevices:
        """The counter sets and devices to publish now, by physical id.

        Without ``publishing.taints`` the healthy chips only; with it every
        chip, the unhealthy ones (and their partitions) with their taint. The
        ``withheld`` chips (a device-plugin pod holds them) are left out, whole.
        """
        counter_sets: list[JsonObject] = []
        chips: list[list[JsonObject]] = []
        for state in self.inventory.chips():
            if state.phy_id in withheld:
                continue  # not free: a scheduler must not allocate it to a claim
            split = self.splits.get(state.phy_id) if publishing.partitions else None
            if state.split and split is None:
                continue  # static vNPUs: the chip is not given whole (made on demand, they are ours)
            taint = taint_of(state, self.driver, evict=self.evict)
            if taint is not None and not publishing.taints:
                continue
            entry = self.entries[state.phy_id]
            if split is not None:
                counter_sets.append(counter_set(state.phy_id, split))
                devices = [self._device(entry, taint, consumption(state.phy_id, split.totals))]
                devices += [
                    self._device(part, taint, consumption(state.phy_id, part.template.takes))
                    for part in self.partitions[state.phy_id]
                    if part.template is not None
                ]
            elif publishing.shares and self.share_count > 1:
                devices = [self._shared(entry, taint)]
            else:
                devices = [self._device(entry, taint)]
            chips.append(devices)
        return PoolDevices(counter_sets, chips)

    def devices(self, publishing: Publishing = Publishing()) -> list[JsonObject]:
        """The devices of :meth:`pool`, in order."""
        return self.pool(publishing).devices

    @staticmethod
    def _device(
        entry: CatalogEntry, taint: JsonObject | None, consumes: list[JsonObject] | None = None
    ) -> JsonObject:
        device: JsonObject = {"name": entry.name, "attributes": dict(entry.attributes)}
        if entry.capacity:
            device["capacity"] = dict(entry.capacity)
        if consumes:
            device["consumesCounters"] = consumes
        if taint is not None:
            device["taints"] = [taint]
        return device

    def _shared(self, entry: CatalogEntry, taint: JsonObject | None) -> JsonObject:
        """A chip as one device of ``share_count`` shares, a claim taking one unless it asks for more.

        Its memory is not a capacity here: every capacity of such a device is
        consumed by its claims, and the driver's device-share mode divides
        time, not memory.
        """
        count = str(self.share_count)
        device: JsonObject = {
            "name": entry.name,
            "attributes": {**entry.attributes, SHARE_COUNT: {"int": self.share_count}},
            "allowMultipleAllocations": True,
            "capacity": {
                SHARES: {
                    "value": count,
                    "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": count, "step": "1"}},
                }
            },
        }
        if taint is not None:
            device["taints"] = [taint]
        return device
