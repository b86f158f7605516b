"""What the node's pool holds: each chip as a ResourceSlice device, its partitions, counter set, taint and
shares, laid out in slices within the API's limits (docs/dra.md "ResourceSlices", "Health", "vNPUs made
on demand", "Shared chips"). What does not change while the plugin runs is worked out once per chip.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from ascend_plugin.faces.dra.names import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_COUNTER_SETS_PER_SLICE,
    MAX_COUNTERS_PER_SET,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_PER_SLICE_ADVANCED,
    MAX_STRING_VALUE,
    checked_attribute_name,
    counter_set_name,
    device_name,
    partition_name,
)
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubeapi.client import JsonObject
from ascend_plugin.offers.base import chip_health
from backends.chips import NO_CARD
from backends.pci import pcie_root
from backends.vnpu_split import MEMORY, ChipSplits, VnpuTemplate

log = logging.getLogger(__name__)

API_VERSION = "resource.k8s.io/v1"  # the ResourceSlices' API group and version
COUNTERS = "sharedCounters"
DEVICES = "devices"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
SHARES = "shares"  # the capacity a shared chip's claims take one of each (unless they ask for more)
SHARE_COUNT = "shareCount"  # the attribute saying a device is a shared chip, and into how many shares
TEMPLATE_ATTRIBUTE = "vnpuTemplate"
# What a partition keeps of its chip's attributes: what claims select or match partitions by (selectors,
# matchAttribute). For each claim on each node the scheduler copies every attribute of every device it
# tests into maps of its own; with the chip's identities (phyID, cardID, driverVersion, ...) as well, it
# spent 8-15 % more CPU a pod (docs/dra.md "What partitions cost the scheduler").
PARTITION_ATTRIBUTES = ("family", "chipName", "topologyUnit", "numaNode", PCIE_ROOT)

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
TAINT_KEY: Final = "unhealthy"  # in the driver's domain: npu.huawei.com/unhealthy
NO_FAULT_CODE: Final = "Unhealthy"  # the taint's value when no fault code explains the verdict
# The levels whose remedy is a reset or a separation, where a running job cannot go on, evict.
TAINT_EFFECTS: Mapping[FaultLevel, str] = MappingProxyType(
    {
        FaultLevel.RestartRequest: NO_SCHEDULE,
        FaultLevel.RestartBusiness: NO_SCHEDULE,
        FaultLevel.FreeRestartNPU: NO_SCHEDULE,  # reset once idle: the running job may finish
        FaultLevel.RestartNPU: NO_EXECUTE,
        FaultLevel.PreSeparateNPU: NO_SCHEDULE,  # separate after the running job
        FaultLevel.SeparateNPU: NO_EXECUTE,
        FaultLevel.ManuallySeparateNPU: NO_EXECUTE,
    }
)

_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_quantity(mib: int) -> str:
    """``mib`` MiB as the API server writes it back (``65536Mi`` is stored ``64Gi``): else every comparison
    with the stored slice would differ, and the slice be rewritten forever."""
    value, suffix = mib * 1024 * 1024, 0
    while value and value % 1024 == 0 and suffix < len(_BINARY_SUFFIXES) - 1:
        value //= 1024
        suffix += 1
    return f"{value}{_BINARY_SUFFIXES[suffix]}"


def counter_value(resource: str, amount: int) -> JsonObject:
    """A counter of a chip's resource: memory (MiB) as a binary quantity, the rest as plain counts."""
    return {"value": binary_quantity(amount) if resource == MEMORY else str(amount)}


def _counters(amounts: Mapping[str, int], *, zeros: bool = False) -> JsonObject:
    """Counters by name; zero amounts only with ``zeros`` (a set's totals, not what a device takes)."""
    return {name: counter_value(name, n) for name, n in sorted(amounts.items()) if zeros or n > 0}


def taint_of(state: ChipState, driver: str, *, evict: bool = True) -> JsonObject | None:
    """An unhealthy chip's taint ``<driver>/unhealthy``, its worst level as value (None if healthy);
    ``evict`` False: ``NoSchedule`` whatever the level."""
    if chip_health([state])[0]:
        return None
    level = state.health.worst_level
    effect = TAINT_EFFECTS.get(level, NO_SCHEDULE) if evict else NO_SCHEDULE
    value = level.name if level in TAINT_EFFECTS else NO_FAULT_CODE
    return {"key": f"{driver}/{TAINT_KEY}", "value": value, "effect": effect}


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
    """The node's chips as devices, their health read from the inventory at each publication. ``splits``:
    what each chip split on demand splits into; ``share_count``: a chip's shares; ``evict``: ``NoExecute``."""

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
        """Each template as often as it fits the chip alone, at most as often as offered (smallest first),
        with its chip's ``PARTITION_ATTRIBUTES``."""
        kept = {name: chip.attributes[name] for name in PARTITION_ATTRIBUTES if name in chip.attributes}
        return tuple(
            CatalogEntry(
                chip.phy_id,
                partition_name(chip.phy_id, template.name, index),
                {
                    **kept,
                    "aiCores": {"int": template.ai_cores},
                    TEMPLATE_ATTRIBUTE: {"string": template.name},
                },
                {"memory": {"value": binary_quantity(template.memory_mb)}},
                template,
            )
            for template in splits.templates
            for index in range(splits.offered(template))
        )

    def pool(self, publishing: Publishing = Publishing(), withheld: Collection[int] = ()) -> PoolDevices:
        """The counter sets and devices to publish now: without ``publishing.taints`` the healthy chips only,
        with it the unhealthy ones tainted; the ``withheld`` chips (device-plugin pods hold them) left out."""
        counter_sets: list[JsonObject] = []
        chips: list[list[JsonObject]] = []
        for state in self.inventory.chips():
            phy = state.phy_id
            if phy in withheld:
                continue  # not free: a scheduler must not allocate it to a claim
            split = self.splits.get(phy) if publishing.partitions else None
            if state.split and split is None:
                continue  # static vNPUs: the chip is not given whole (made on demand, they are ours)
            taint = taint_of(state, self.driver, evict=self.evict)
            if taint is not None and not publishing.taints:
                continue
            entry = self.entries[phy]
            if split is not None:
                assert len(split.totals) <= MAX_COUNTERS_PER_SET  # a family counts a handful
                counter_sets.append(
                    {"name": counter_set_name(phy), "counters": _counters(split.totals, zeros=True)}
                )
                devices = [_device(entry, taint, split.totals)]
                devices += [
                    _device(part, taint, part.template.takes)
                    for part in self.partitions[phy]
                    if part.template is not None
                ]
            elif publishing.shares and self.share_count > 1:
                devices = [self._shared(entry, taint)]
            else:
                devices = [_device(entry, taint)]
            chips.append(devices)
        return PoolDevices(counter_sets, chips)

    def _shared(self, entry: CatalogEntry, taint: JsonObject | None) -> JsonObject:
        """A chip as one device of ``share_count`` shares; no memory capacity (a claim consumes every
        capacity of such a device, and device-share mode divides time, not memory)."""
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


def _device(
    entry: CatalogEntry, taint: JsonObject | None, takes: Mapping[str, int] | None = None
) -> JsonObject:
    """A device; ``takes``: what it consumes of its chip's counter set (a chip split on demand)."""
    device: JsonObject = {"name": entry.name, "attributes": dict(entry.attributes)}
    if entry.capacity:
        device["capacity"] = dict(entry.capacity)
    if takes:
        device["consumesCounters"] = [
            {"counterSet": counter_set_name(entry.phy_id), "counters": _counters(takes)}
        ]
    if taint is not None:
        device["taints"] = [taint]
    return device


def spec_devices(spec: Mapping[str, object]) -> list[JsonObject]:
    """The devices of a slice's spec (or of a slice's content), whatever else the API server put there."""
    devices = spec.get(DEVICES)
    return [device for device in devices if isinstance(device, dict)] if isinstance(devices, list) else []


def device_limit(devices: Sequence[JsonObject]) -> int:
    """How many devices one slice of these may hold: 64 once any has taints or consumes counters."""
    advanced = any(device.get("taints") or device.get("consumesCounters") for device in devices)
    return MAX_DEVICES_PER_SLICE_ADVANCED if advanced else MAX_DEVICES_PER_SLICE


def slice_contents(pool: PoolDevices) -> list[JsonObject]:
    """The spec content of each slice (``sharedCounters`` or ``devices``), counter slices first; a chip's
    devices share a slice, and an empty pool is one empty slice (its generation stays visible)."""
    contents: list[JsonObject] = [
        {COUNTERS: pool.counter_sets[start : start + MAX_COUNTER_SETS_PER_SLICE]}
        for start in range(0, len(pool.counter_sets), MAX_COUNTER_SETS_PER_SLICE)
    ]
    limit = device_limit(pool.devices)
    chunk: list[JsonObject] = []
    for chip in pool.chips:
        if len(chunk) + len(chip) > limit and chunk:
            contents.append({DEVICES: chunk})
            chunk = []
        assert len(chip) <= limit  # a chip's partitions: 31 at most (a 32-core 910)
        chunk = [*chunk, *chip]
    if chunk or not contents:
        contents.append({DEVICES: chunk})
    return contents
