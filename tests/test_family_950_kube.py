"""A 950 node's Kubernetes objects, as Huawei's plugin writes them, from the C fake's Atlas 850.

The device-info ConfigMap keys are ``huawei.com/npu``, ``-Unhealthy``,
``-NetworkUnhealthy``, ``-Recovering`` and ``-Fault``, the chips in them
``npu-<physical id>``, ``ManuallySeparateNPU`` too; a node in a 950 SuperPoD's
rack says ``RackID``. The node labels: ``accelerator=huawei-npu``, the chip name,
``servertype=npu-<AI cores>`` (kept as Huawei keeps it), the chip memory and
the node's place in its super pod (``huawei.com/topotree.*``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import CFakePlayer
from node_950 import RESOURCE, host, node_950
from plugin_harness import player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.faces.kube.huawei_format import SuperPodPlace
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.library import SuperPodInfo

pytestmark = pytest.mark.anyio

NODE = "atlas-850"
CONFIGMAP = f"mindx-dl-deviceinfo-{NODE}"
# A node of a 2D Atlas 950 SuperPoD: pod 7, rack 3, server 12 (dcmi_spod_info).
LABELS = "ascend_plugin.faces.kube.labels"
POD = {"super_pod_id": 7, "server_id": 12, "chassis_id": 3, "super_pod_type": 2, "scale_type": 64}


def document(apiserver: FakeApiServer) -> dict[str, Any] | None:
    configmap = apiserver.get("configmaps", CONFIGMAP, "kube-system")
    return None if configmap is None else json.loads(configmap["data"]["DeviceInfoCfg"])


async def test_device_info_and_labels_of_a_950_node(
    c_fake: CFakePlayer,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    short_tmp: Path,
) -> None:
    apiserver.add_node(NODE, {"servertype": "someone-else"})
    c_fake.update(node_950({6: {"fault_codes": ["80E01801"]}}, aicore_cnt=32, super_pod=POD))
    settings = player_settings(
        c_fake, plugin_dir, host(short_tmp / "host"), node_name=NODE, kubeconfig=kubeconfig
    )
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(
            lambda: (
                (doc := document(apiserver)) is not None
                and doc["DeviceInfo"]["DeviceList"][f"{RESOURCE}-Unhealthy"] == "npu-6"
            ),
            "npu-6 unhealthy in the device-info ConfigMap",
        )
        await until(lambda: apiserver.node_labels(NODE).get("servertype") == "npu-32", "servertype")
    doc = document(apiserver)
    assert doc is not None
    listed = doc["DeviceInfo"]["DeviceList"]
    assert set(listed) == {
        RESOURCE,
        f"{RESOURCE}-Unhealthy",
        f"{RESOURCE}-NetworkUnhealthy",
        f"{RESOURCE}-Recovering",
        f"{RESOURCE}-Fault",
    }
    assert listed[RESOURCE] == "npu-0,npu-1,npu-2,npu-3,npu-4,npu-5,npu-7"
    [fault] = json.loads(listed[f"{RESOURCE}-Fault"])
    assert (fault["npu_name"], fault["fault_code"]) == ("npu-6", "80E01801")
    assert (doc["SuperPodID"], doc["ServerIndex"], doc["RackID"]) == (7, 12, 3)
    assert list(doc) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode", "RackID"]
    labels = apiserver.node_labels(NODE)
    assert {key: labels[key] for key in labels if not key.startswith("ascend-device-plugin.io/")} == {
        "accelerator": "huawei-npu",
        "node.kubernetes.io/npu.chip.name": "Ascend950PR",
        "servertype": "npu-32",  # Huawei keeps its own value on a 950: someone else's is overwritten
        "huawei.com/driver.version": "26.0.rc1",
        "mind-cluster/npu-chip-memory": "128G",
        "huawei.com/topotree.superpodid": "7",
        "huawei.com/topotree.rackid": "3",
        "huawei.com/topotree.serverid": "12",
    }


def test_only_a_950_s_chassis_is_a_rack() -> None:
    a3 = SuperPodInfo(sdid=0, scale_type=0, super_pod_id=7, server_id=1, chassis_id=3, super_pod_type=2)
    assert SuperPodPlace.of(a3) == SuperPodPlace(7, 1, None)
    assert SuperPodPlace.of(dataclasses.replace(a3, racks=True)) == SuperPodPlace(7, 1, 3)
    assert SuperPodPlace.of(dataclasses.replace(a3, racks=True, super_pod_type=0)).rack_id is None
