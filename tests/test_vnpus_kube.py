"""The Kubernetes side of a split node: Huawei's device-info ConfigMap and labels speak of chips, not vNPUs.

The plugin runs on the C fake (an Atlas 300I Duo, its first chip split into
three vNPUs) against the loopback API server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import CFakePlayer
from plugin_harness import player_settings, registered, running_plugin
from split_nodes import FAULT, duo, make_host, with_chip
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

NODE = "atlas-300i-duo"
CONFIGMAP = f"mindx-dl-deviceinfo-{NODE}"


def device_list(apiserver: FakeApiServer) -> dict[str, str] | None:
    configmap = apiserver.get("configmaps", CONFIGMAP, "kube-system")
    if configmap is None:
        return None
    document: dict[str, Any] = json.loads(configmap["data"]["DeviceInfoCfg"])
    listed: dict[str, str] = document["DeviceInfo"]["DeviceList"]
    return listed


async def test_vnpus_are_not_listed_and_a_sick_vnpu_lists_its_chip_unhealthy(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    short_tmp: Path,
) -> None:
    apiserver.add_node(NODE)
    c_fake.update(duo())
    host = make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")
    settings = player_settings(c_fake, plugin_dir, host, node_name=NODE, kubeconfig=kubeconfig)
    async with running_plugin(settings):
        await wait_for(kubelet, registered("huawei.com/Ascend310P-2c"), "registration")
        await until(lambda: device_list(apiserver) is not None, "the device-info ConfigMap")
        # Huawei's format lists physical chips only, the split one included; no vNPU ID anywhere.
        listed = device_list(apiserver)
        assert listed is not None
        assert set(listed) == {
            "huawei.com/Ascend310P",
            "huawei.com/Ascend310P-Unhealthy",
            "huawei.com/Ascend310P-Fault",
        }
        assert listed["huawei.com/Ascend310P"] == "Ascend310P-0,Ascend310P-1"
        assert "Ascend310P-2c" not in json.dumps(listed)
        assert "Ascend310P-4c" not in json.dumps(listed)
        # Volcano reads servertype: the chip's own AI cores, whatever its split.
        await until(lambda: "servertype" in apiserver.node_labels(NODE), "labels")
        assert apiserver.node_labels(NODE)["servertype"] == "Ascend310P-8"

        c_fake.update(with_chip(duo(), 0, fault_codes=[FAULT]))
        await wait_for(
            kubelet,
            lambda k: set(k.health("huawei.com/Ascend310P-2c").values()) == {"Unhealthy"},
            "the vNPUs unhealthy",
        )
        await until(
            lambda: (device_list(apiserver) or {}).get("huawei.com/Ascend310P-Unhealthy") == "Ascend310P-0",
            "the split chip listed unhealthy",
        )
        listed = device_list(apiserver)
        assert listed is not None
        assert listed["huawei.com/Ascend310P"] == "Ascend310P-1"
        faults = json.loads(listed["huawei.com/Ascend310P-Fault"])
        assert [(fault["npu_name"], fault["fault_code"]) for fault in faults] == [("Ascend310P-0", FAULT)]
