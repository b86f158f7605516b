"""The DRA driver on a 950 node: devices ``npu-<physical id>`` under npu.huawei.com, whole chips only.

Each device says its DCMI v2 address (``logicID``; v2 has no card and device
ids), and a prepared claim's CDI spec hands over ``/dev/davinci<logical id>`` and
the UB stack's nodes and the driver's topology file, as the device plugin does.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from dra_harness import (
    CDI_KIND,
    DRIVER,
    NODE,
    device_names,
    make_dra_node,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
    standin,
)
from fake_apiserver import FakeApiServer
from node_950 import CHIPS, logic_of
from waiting import until, wait_for

from ascend_plugin.testing.simulate_950 import ATLAS_850, TOPOLOGY_FILE, prepare_host

pytestmark = pytest.mark.anyio


async def test_a_950_node_publishes_whole_chips_and_prepares_them_by_logical_id(
    apiserver: FakeApiServer, kubeconfig: Path, short_tmp: Path
) -> None:
    node = make_dra_node(short_tmp / "dra", ATLAS_850)
    prepare_host(node.host_root)  # and the UB stack's nodes, the NUMA nodes
    settings = node.settings(kubeconfig)
    apiserver.add_node(NODE)
    kubelet = standin(node, apiserver)
    await anyio.to_thread.run_sync(kubelet.start)
    try:
        async with running_driver(settings):
            await wait_for(kubelet, registered, "the driver registered")
            names = [f"npu-{phy}" for phy in range(CHIPS)]
            await until(lambda: sorted(device_names(apiserver.slices(DRIVER, NODE))) == names, "published")
            [slice_] = apiserver.slices(DRIVER, NODE)
            devices = {device["name"]: device for device in slice_["spec"]["devices"]}
            attributes = devices["npu-1"]["attributes"]
            assert attributes["family"] == {"string": "950"}
            assert attributes["phyID"] == {"int": 1}
            assert attributes["logicID"] == {"int": logic_of(1)}
            assert "cardID" not in attributes
            assert "deviceID" not in attributes
            assert not any("vnpuTemplate" in device["attributes"] for device in devices.values())

            claim = put_claim(apiserver, "infer", [result("npu-1")])
            answer = await prepare(kubelet, claim)
            uid = claim[2]
            assert answer.claims[uid].error == ""
            assert answer.claims[uid].devices[0].cdi_device_ids == [f"{CDI_KIND}={uid}-npu-1"]
            spec = node.spec_files()[f"huawei.com-npu-claim-{uid}.json"]
            [device] = spec["devices"]
            assert device["containerEdits"]["deviceNodes"][0]["path"] == f"/dev/davinci{logic_of(1)}"
            shared = [entry["path"] for entry in spec["containerEdits"]["deviceNodes"]]
            assert shared == [
                "/dev/davinci_manager",
                "/dev/hisi_hdc",
                "/dev/uburma/uburma0",
                "/dev/uburma/uburma1",
                "/dev/ummu/ummu",
            ]
            assert spec["containerEdits"]["env"] == [f"HCCL_TOPO_FILE_PATH={TOPOLOGY_FILE}"]
    finally:
        await anyio.to_thread.run_sync(kubelet.stop)
