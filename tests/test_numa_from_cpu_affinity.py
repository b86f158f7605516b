"""A chip's NUMA node, on every family: its CPU affinity matched to the host's nodes, else its PCIe device's.

Huawei's plugin (August 2026) asks ``dcmi_get_affinity_cpu_info_by_device_id``
(v2: ``..._by_dev_id``) for the CPUs near each chip and looks that cpulist up,
text for text, among ``/sys/devices/system/node/node<N>/cpulist``. Where the
driver does not answer (-8255 on most boards), or answers a list no node has
(the driver keeps only 31 characters), the PCIe device's ``numa_node`` stands in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from node_harness import discovered

from ascend_plugin.chip_calls import ChipCalls
from backends.pci import node_cpulists

LONG = ",".join(str(cpu) for cpu in range(0, 40, 2))  # 78 characters: the driver cuts it to 31


def host_with_numa(root: Path) -> Path:
    """Two NUMA nodes (CPUs 0-23, 24-47, and one with a long list); chips 2 and 3's PCIe devices on node 1."""
    for number, cpus in ((0, "0-23"), (1, "24-47"), (2, LONG)):
        directory = root / "sys/devices/system/node" / f"node{number}"
        directory.mkdir(parents=True)
        (directory / "cpulist").write_text(cpus + "\n", encoding="ascii")
    for bus in (3, 4):  # chips 2 and 3 (default PCIe addresses: phy N on bus N + 1)
        device = root / f"sys/bus/pci/devices/0000:{bus:02x}:00.0"
        device.mkdir(parents=True)
        (device / "numa_node").write_text("1\n", encoding="ascii")
    return root


@pytest.mark.anyio
async def test_the_affinity_s_node_else_the_pcie_device_s(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls, tmp_path: Path
) -> None:
    scenario = {
        "chip_name": "910B3",
        "chips": [
            {"phy_id": 0, "cpu_affinity": "24-47"},  # node 1 by its CPUs (its PCIe device says nothing)
            {"phy_id": 1, "cpu_affinity": "0-23"},
            {"phy_id": 2, "cpu_affinity": "0-5"},  # no node lists it: its PCIe device's node
            {"phy_id": 3},  # the driver does not say (-8255): its PCIe device's node
            {"phy_id": 4, "cpu_affinity": LONG},  # cut to 31 characters by the driver: matches no node
            {"phy_id": 5},  # neither says: none
        ],
    }
    inventory = await discovered(any_fake, calls, scenario, host_with_numa(tmp_path))
    assert [state.numa_node for state in inventory.chips()] == [1, 0, 1, 1, None, None]


def test_the_host_s_nodes_by_their_cpulists(tmp_path: Path) -> None:
    assert node_cpulists(host_with_numa(tmp_path)) == {"0-23": 0, "24-47": 1, LONG: 2}
    assert node_cpulists(tmp_path / "elsewhere") == {}
