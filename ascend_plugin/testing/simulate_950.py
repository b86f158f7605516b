"""``simulate --family 950``: an Atlas 850 (eight Ascend 950PR) served through DCMI v2, narrated.

``npu-<physical id>`` to the kubelet, ``/dev/davinci<logical id>`` to a container (docs/ascend-950.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from ascend_plugin.app import PluginApp
from ascend_plugin.settings import Settings
from ascend_plugin.testing.kubelet_standin import KubeletStandIn, Stage
from ascend_plugin.testing.scenario_writer import write_scenario

RESOURCE = "huawei.com/npu"
CHIPS = 8


def logic_of(phy: int) -> int:
    """The Atlas 850 of the demo numbers its chips' logical ids four off their physical ids."""
    return (phy + 4) % CHIPS


def atlas_850(chips: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The demo's node: eight Ascend 950PR on two NUMA nodes; ``chips`` adds fields per physical id.
    Like a real 950's driver, it lacks the period utilization call."""
    return {
        "chip_name": "Ascend950PR",
        "memory_mb": 131072,
        "driver_version": "26.0.rc1",
        "missing": ["multi_utilization_period"],
        "chips": [
            {
                "phy_id": phy,
                "logic_id": logic_of(phy),
                "cpu_affinity": "0-47" if phy < CHIPS // 2 else "48-95",
                **(chips or {}).get(phy, {}),
            }
            for phy in range(CHIPS)
        ],
    }


ATLAS_850: dict[str, Any] = atlas_850()
# What an Atlas 850 host exposes under /dev: its chips, the managers, the UB stack's nodes.
HOST_NODES = (
    *(f"davinci{logic}" for logic in range(CHIPS)),
    "davinci_manager", "hisi_hdc", "uburma/uburma0", "uburma/uburma1", "ummu/ummu",
)  # fmt: skip
# The driver's topology file of an 8P Atlas 850 (super_pod_type 0), which containers are told of.
TOPOLOGY_FILE = "/usr/local/Ascend/driver/topo/950/atlas_850_1.json"
# Its NUMA nodes' CPUs, as /sys/devices/system/node/node<N>/cpulist says.
NUMA_CPUS = {0: "0-47", 1: "48-95"}


def prepare_host(host: Path) -> None:
    """The fake host's /dev nodes, NUMA nodes and driver directory with its topology file."""
    for node in HOST_NODES:
        (host / "dev" / node).parent.mkdir(parents=True, exist_ok=True)
        (host / "dev" / node).touch()
    for number, cpus in NUMA_CPUS.items():
        directory = host / "sys/devices/system/node" / f"node{number}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cpulist").write_text(cpus + "\n", encoding="ascii")
    topology = host / TOPOLOGY_FILE.lstrip("/")
    topology.parent.mkdir(parents=True, exist_ok=True)
    topology.write_text("{}\n", encoding="ascii")  # the driver's; the plugin only names it


async def timeline(
    settings: Settings, kubelet: KubeletStandIn, scenario: Path, out: Callable[[str], None]
) -> int:
    """Register, list, allocate, a UB link down by event, a polled fault; 0 when all happened."""
    stage = Stage(kubelet, out)
    app = PluginApp(settings)
    write_scenario(scenario, ATLAS_850)
    stage.say("fake node: an Atlas 850, eight Ascend 950PR; dcmi_init answers -8255, so DCMI v2 it is")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        await stage.registered({RESOURCE})
        assert app.inventory is not None
        stage.say(f"chips found via {app.inventory.facts.library}")
        for state in app.inventory.chips():
            chip = state.chip
            stage.say(f"    npu-{chip.phy_id}: logical id {chip.logic_id}, NUMA node {state.numa_node}")
        view = kubelet.resources[RESOURCE]
        stage.say(f"registered {RESOURCE}: capacity={view.capacity} allocatable={view.allocatable}")
        await stage.allocate(RESOURCE, ["npu-0", "npu-1"])
        stage.say("    (npu-0 and npu-1 are the chips of logical ids 4 and 5: their /dev/davinci4, 5)")

        write_scenario(scenario, atlas_850({3: {"events": [{"serial": 1, "code": "81B18603"}]}}))
        stage.say("the driver sends 81B18603 (a UB port of npu-3 down); Huawei adds 020001002 (SeparateNPU)")
        await stage.wait(lambda k: k.health(RESOURCE).get("npu-3") == "Unhealthy", "npu-3 unhealthy")
        stage.say(f"kubelet sees npu-3 Unhealthy, allocatable={kubelet.resources[RESOURCE].allocatable}")
        back = {"serial": 2, "code": "81B18603", "assertion": 0}
        up = {"events": [{"serial": 1, "code": "81B18603"}, back]}
        write_scenario(scenario, atlas_850({3: up, 6: {"fault_codes": ["80E01801"]}}))
        stage.say("the port is back (a recovery event); npu-6 reports 80E01801 (SeparateNPU)")
        await stage.wait(
            lambda k: (
                k.health(RESOURCE).get("npu-3") == "Healthy"
                and k.health(RESOURCE).get("npu-6") == "Unhealthy"
            ),
            "npu-3 healthy, npu-6 unhealthy",
        )
        stage.say("kubelet sees npu-3 Healthy again and npu-6 Unhealthy")
        app.stop()
    return 0
