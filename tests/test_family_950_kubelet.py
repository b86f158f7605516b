"""An Atlas 850 (eight Ascend 950) on the real binding: what the kubelet sees and what a container gets.

The C fake plays the node through DCMI v2. The kubelet counts ``huawei.com/npu: 8``
under Huawei's IDs, ``npu-<physical id>``, each with the NUMA node its CPU
affinity names; a container holding two chips gets the ``/dev/davinci`` nodes
of their logical ids and the UB stack's nodes, or (runtime mode) their logical
ids in ``ASCEND_VISIBLE_DEVICES``; either way ``HCCL_TOPO_FILE_PATH`` names the
driver's topology file of an Atlas 850.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from node_950 import CHIPS, RESOURCE, host, logic_of, node_950
from plugin_harness import player_settings, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from ascend_plugin.testing.simulate_950 import TOPOLOGY_FILE

pytestmark = pytest.mark.anyio

IDS = [f"npu-{phy}" for phy in range(CHIPS)]


async def test_capacity_ids_and_numa_nodes(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    c_fake.update(node_950())
    async with running_plugin(player_settings(c_fake, plugin_dir, host(short_tmp / "host"))) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert kubelet.node_capacity() == {RESOURCE: CHIPS}
        view = kubelet.resources[RESOURCE]
        assert sorted(view.devices) == sorted(IDS)
        assert set(view.devices.values()) == {"Healthy"}
        # Chips 0-3 have the CPUs of NUMA node 0 near them, 4-7 those of node 1 (their CPU affinity).
        assert view.numa == {f"npu-{phy}": (phy // 4,) for phy in range(CHIPS)}
        assert app.inventory is not None
        assert app.inventory.facts.library.endswith("(DCMI v2)")


@pytest.mark.parametrize("mode", ["device", "runtime"])
async def test_allocate_hands_over_the_logical_ids(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path, mode: str
) -> None:
    c_fake.update(node_950())
    settings = player_settings(c_fake, plugin_dir, host(short_tmp / "host"), allocate_mode=mode)
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["npu-1", "npu-6"])
    container = response.container_responses[0]
    logical = [logic_of(1), logic_of(6)]  # 5 and 2
    if mode == "runtime":
        assert dict(container.envs) == {
            "ASCEND_VISIBLE_DEVICES": ",".join(map(str, logical)),
            "ASCEND_RUNTIME_OPTIONS": "",
            "HCCL_TOPO_FILE_PATH": TOPOLOGY_FILE,
        }
        assert list(container.devices) == []
        return
    assert dict(container.envs) == {"HCCL_TOPO_FILE_PATH": TOPOLOGY_FILE}
    assert [(spec.host_path, spec.container_path) for spec in container.devices] == [
        *((f"/dev/davinci{n}", f"/dev/davinci{n}") for n in logical),
        ("/dev/davinci_manager", "/dev/davinci_manager"),
        ("/dev/hisi_hdc", "/dev/hisi_hdc"),
        ("/dev/uburma/uburma0", "/dev/uburma/uburma0"),
        ("/dev/uburma/uburma1", "/dev/uburma/uburma1"),
        ("/dev/ummu/ummu", "/dev/ummu/ummu"),
    ]
    assert {spec.permissions for spec in container.devices} == {"rw"}
