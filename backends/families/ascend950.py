"""Ascend 950 (A5): Atlas 350 cards, Atlas 850 servers, the Atlas 950 SuperPoD, through DCMI v2.

``npu-<physical id>`` but ``/dev/davinci<logical id>``; UB ports, not RoCE (docs/ascend-950.md).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from types import MappingProxyType
from typing import ClassVar, Final

from backends.backend import UTILIZATION_PERIOD_S, ChipBackend, MemoryKind, Utilization
from backends.chips import Chip, HealthReading
from backends.family_table import FamilyTable
from backends.library import FaultEvent, FaultHandler, SuperPodInfo
from backends.topology import UnitKind, alone

ASCEND_950 = FamilyTable(
    family="950",
    chip_names=re.compile(r"^Ascend950"),
    resource_name="huawei.com/npu",
    device_id_prefix="npu",
    accelerator_label="huawei-npu",
    # Huawei's plugin checks every family's figure against [8, 36]; the 950's own count is not published.
    ai_core_min=8,
    ai_core_max=36,
    ai_core_nominal=0,
    shared_node_dirs=("/dev/uburma", "/dev/ummu"),
    nodes_by_logic_id=True,
    network_keys=True,
    server_type_prefix="npu",
    server_type_enforced=True,
    stale_resources=("huawei.com/Ascend910",),
    topology_labels=True,
    topology_files=MappingProxyType(
        {
            kind: f"/usr/local/Ascend/driver/topo/950/{name}"
            for kind, name in {
                0: "atlas_850_1.json",  # 8P server
                1: "atlas_950_1.json",  # 1D SuperPoD
                2: "atlas_950_2.json",  # 2D SuperPoD
                3: "atlas_850_2.json",  # 16P server
                4: "atlas_850_3.json",  # 32P server
                5: "atlas_350_1.json",  # Atlas 350 card, 1P (Huawei picks it by board id: the same product)
                6: "atlas_350_3.json",  # Atlas 350 card, 4P mesh
            }.items()
        }
    ),
)

# A UB port of the chip is down (the driver's event), and the code Huawei adds with each occurrence:
# a member port down whose route does not converge.
UB_PORT_DOWN: Final = 0x81B18603
UB_ROUTE_LOST: Final = 0x020001002


class Ascend950(ChipBackend):
    """The 950 family over DCMI v2: a full mesh of 8 per server, HBM, fault events, resets alone."""

    TABLE = ASCEND_950
    unit_kind: ClassVar[UnitKind] = UnitKind.MESH
    memory_kind: ClassVar[MemoryKind] = MemoryKind.HBM
    utilization_sampling_s: ClassVar[float] = float(UTILIZATION_PERIOD_S)

    def read_health(self, chip: Chip) -> HealthReading:
        """The chip's health and codes; ``020001002`` beside a UB port's ``81B18603``, as Huawei adds it."""
        reading = super().read_health(chip)
        if UB_PORT_DOWN in reading.codes and UB_ROUTE_LOST not in reading.codes:
            return dataclasses.replace(reading, codes=(*reading.codes, UB_ROUTE_LOST))
        return reading

    def subscribe_faults(self, handler: FaultHandler) -> bool:
        """``dcmiv2_subscribe_fault_event`` for every chip, ``020001002`` delivered beside ``81B18603``."""

        def deliver(event: FaultEvent) -> None:
            handler(event)
            if event.code == UB_PORT_DOWN:  # raised or recovered alike
                handler(dataclasses.replace(event, code=UB_ROUTE_LOST))

        return self.subscribe_driver_events(deliver)

    def device_ip(self, chip: Chip) -> str | None:
        """None: the 950 has no RoCE port (``dcmiv2`` has no device-IP call); its rank table uses EIDs."""
        return None

    def utilization(self, chip: Chip) -> Utilization:
        return self.multi_rate_utilization(chip)

    def network_status(self, chip: Chip) -> int | None:
        """None: no RoCE link to watch; the UB and UBoE ports speak through fault codes."""
        return None

    def exported_network_status(self, chip: Chip) -> int | None:
        """``dcmiv2_get_device_network_health``, as npu-exporter shows it (not on Atlas 350 cards)."""
        return self.network_health(chip)

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        """The chip alone (Huawei's ring size 1 for the 950)."""
        return alone(chip, chips)

    def super_pod(self, chip: Chip) -> SuperPodInfo | None:
        """``dcmiv2_get_device_info(CHIP_INF, SPOD_INFO)``: the super pod, server index and rack."""
        return dataclasses.replace(self.api.super_pod_info(chip), racks=True)

    def card_count(self, chips: Sequence[Chip]) -> int | None:
        """None: DCMI v2 has no cards (npu-exporter's ``machine_card_nums`` is not shown on a 950)."""
        return None

    def vnpu_absence(self) -> str:
        return (
            "the Ascend 950 has no HDK vNPUs (its DCMI v2 driver makes none; Huawei's plugin refuses "
            "presetVirtualDevice=false there too)"
        )
