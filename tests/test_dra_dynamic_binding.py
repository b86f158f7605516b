"""vnpu=dynamic through the real binding: the partition's vNPU made and destroyed by the C fake libdcmi.so.

The same claim lifecycle as the pure-Python fake's tests, but every DCMI call
(dcmi_create_vdevice with its struct, dcmi_set_destroy_vdevice, the VDEV_MNG
queries) crosses the cffi binding into the C fake with Huawei's ABI.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_harness import (
    A2_SERVER,
    NODE,
    DraNode,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
    unprepare,
)
from fake_apiserver import FakeApiServer
from fake_dcmi.players import CFakePlayer
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio


def vnpus_on(app: PluginApp, phy: int) -> list[tuple[int, str]]:
    assert app.inventory is not None
    state = app.inventory.get(phy)
    assert state is not None
    return [(vnpu.vdev_id, vnpu.template) for vnpu in state.vnpus or ()]


async def test_a_partition_s_vnpu_crosses_the_binding_both_ways(
    c_fake: CFakePlayer,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
) -> None:
    c_fake.update(FakeScenario.model_validate(A2_SERVER))
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    settings = dra_node.settings(
        kubeconfig,
        vnpu="dynamic",
        dra_partition_places=0,  # the third vir05 of chip 6
        backend="dcmi",
        fake_scenario=None,
        dcmi_library=c_fake.current_library(),
        dcmi_allow_untrusted_library=True,
    )
    async with running_driver(settings) as app:
        await wait_for(dra_kubelet, registered, "registered")
        claim = put_claim(apiserver, "infer", [result("npu-6-vir05-1c-16g-2")])
        answer = (await prepare(dra_kubelet, claim)).claims[claim[2]]
        assert answer.error == ""
        ((vdev, template),) = await until(lambda: vnpus_on(app, 6), "the vNPU the C fake made")
        assert template == "vir05_1c_16g"
        assert 196 <= vdev <= 211, "chip 6's range"
        spec = dra_node.spec_files()[f"huawei.com-npu-claim-{claim[2]}.json"]
        assert spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"] == f"/dev/vdavinci{vdev}"
        assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        await until(lambda: vnpus_on(app, 6) == [], "destroyed through dcmi_set_destroy_vdevice")
