"""The nodes the sharing and vNPU tests split: scenarios, host roots, and what a whole chip gets.

An Atlas 200I A2 (one 310B1), an Atlas 300I Duo (two 310P3 on one card, the
first split vir02 + vir02 + vir04) and a 910B3 box (the first chip split into
two vir10_3c_32g), each with the device nodes its host would have.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
from fake_dcmi.players import ScenarioPlayer
from node_harness import handover, whole_chips

from ascend_plugin.handover.modes import HandoverMode
from ascend_plugin.kubelet_api.v1beta1 import ContainerAllocateResponse
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.families import FamilyTable

FAULT = "80E01801"  # SeparateNPU

# The Duo's first chip: two 2-core vNPUs and a 4-core one (8 cores, 24 GiB in all).
DUO_SPLIT = (
    {"vdev_id": 100, "template": "vir02", "memory_mb": 6144},
    {"vdev_id": 101, "template": "vir02", "memory_mb": 6144},
    {"vdev_id": 102, "template": "vir04", "memory_mb": 12288},
)
# The 910B3's first chip: two vNPUs of 10 cores, 3 AI CPUs and 32 GiB each.
B3_SPLIT = (
    {"vdev_id": 100, "template": "vir10_3c_32g"},
    {"vdev_id": 101, "template": "vir10_3c_32g"},
)

SHARED_NODES = (
    "/dev/davinci_manager", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm",
    "/dev/svm0", "/dev/vpc",
)  # fmt: skip


def _chips(
    phy_ids: Sequence[int],
    vdevs: Mapping[int, Iterable[Mapping[str, Any]]],
    faults: Iterable[int],
    card: int | None,
) -> list[dict[str, Any]]:
    faulty = set(faults)
    return [
        {
            "phy_id": phy,
            **({"card_id": card} if card is not None else {}),
            "fault_codes": [FAULT] if phy in faulty else [],
            "vdevs": [dict(vdev) for vdev in vdevs.get(phy, ())],
        }
        for phy in phy_ids
    ]


def atlas_200i_a2(faults: Iterable[int] = ()) -> FakeScenario:
    """One 310B1 SoC."""
    return FakeScenario.model_validate(
        {"chip_name": "310B1", "memory_mb": 4096, "chips": _chips([0], {}, faults, 0)}
    )


def duo(
    vdevs: Mapping[int, Iterable[Mapping[str, Any]]] | None = None, faults: Iterable[int] = ()
) -> FakeScenario:
    """An Atlas 300I Duo: two 310P3 chips on card 0; by default the first split as DUO_SPLIT."""
    split = {0: DUO_SPLIT} if vdevs is None else vdevs
    return FakeScenario.model_validate(
        {"chip_name": "310P3", "memory_mb": 24576, "chips": _chips([0, 1], split, faults, 0)}
    )


def box_910b3(
    vdevs: Mapping[int, Iterable[Mapping[str, Any]]] | None = None, faults: Iterable[int] = ()
) -> FakeScenario:
    """Two 910B3 chips of a box; by default the first split as B3_SPLIT."""
    split = {0: B3_SPLIT} if vdevs is None else vdevs
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "memory_mb": 65536, "chips": _chips([0, 1], split, faults, None)}
    )


def atlas_300i(faults: Iterable[int] = ()) -> FakeScenario:
    """An Atlas 300I card: four 310 chips."""
    return FakeScenario.model_validate({"chip_name": "310", "chips": _chips(range(4), {}, faults, 5)})


def with_chip(scenario: FakeScenario, phy: int, **fields: Any) -> FakeScenario:
    """``scenario`` with chip ``phy`` changed (validated afresh: a copy would keep stale derived fields)."""
    data = scenario.model_dump(exclude_none=True)
    data["chips"] = [chip | fields if chip["phy_id"] == phy else chip for chip in data["chips"]]
    return FakeScenario.model_validate(data)


def make_host(root: Path, *paths: str) -> Path:
    """A host root holding the family's shared nodes, the driver directory and ``paths``."""
    for path in (*SHARED_NODES, *paths):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    (root / "usr/local/Ascend/driver").mkdir(parents=True, exist_ok=True)
    return root


def whole_chip_nodes(player: ScenarioPlayer[Any], table: FamilyTable, host: Path, phy: int) -> list[str]:
    """The device nodes (host paths) a container holding chip ``phy`` whole gets, by the device mode."""
    devices = [device for device in whole_chips(player.open(), table) if device.chips == (phy,)]
    grant = handover(HandoverMode.DEVICE, table, host).grant(devices)
    return [node.host_path for node in grant.devices]


async def allocate(kubelet: KubeletStandIn, resource: str, ids: Sequence[str]) -> ContainerAllocateResponse:
    """Allocate ``ids`` for one container, as a pod's admission does; the container's answer."""
    response = await anyio.to_thread.run_sync(kubelet.allocate, resource, list(ids))
    return response.container_responses[0]


def node_paths(container: ContainerAllocateResponse) -> list[tuple[str, str]]:
    """(host path, container path) of each device node the container gets."""
    return [(spec.host_path, spec.container_path) for spec in container.devices]
