"""What Volcano mode writes on pods and in the device-info ConfigMap: the rank table and the free list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import (
    NODE,
    NODE_IP,
    RESOURCE,
    add_node_object,
    annotations_of,
    device_ip,
    make_node,
    rank_table_of,
    scenario,
    synced,
    volcano_pod,
    volcano_settings,
)
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


def free_list(apiserver: FakeApiServer) -> str | None:
    configmap = apiserver.get("configmaps", f"mindx-dl-deviceinfo-{NODE}", "kube-system")
    if configmap is None:
        return None
    document: dict[str, Any] = json.loads(configmap["data"]["DeviceInfoCfg"])
    listed: str = document["DeviceInfo"]["DeviceList"][RESOURCE]
    return listed


async def test_the_rank_table_names_the_pod_the_node_and_each_chip_with_its_device_ip(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    node.write(scenario(without_ip=(5,)))
    pod = apiserver.put("pods", volcano_pod("hccl", [5, 4], 3))
    apiserver.put(
        "pods", volcano_pod("left-alone", [7], 4, extra_annotations={"huawei.com/AscendReal": "Ascend910-7"})
    )
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        await anyio.to_thread.run_sync(
            pod_resources.admit, "default", "hccl", RESOURCE, ["Ascend910-1", "Ascend910-0"]
        )
        await until(lambda: rank_table_of(apiserver, "hccl") is not None, "the rank table")
        patched = {request.name for request in apiserver.requests_of("patch", "pods")}
    assert rank_table_of(apiserver, "hccl") == {
        "pod_name": "hccl",
        "server_id": pod["metadata"]["uid"],
        "host_ip": NODE_IP,
        "devices": [
            {"device_id": "4", "device_ip": device_ip(4), "super_device_id": "-2"},
            {"device_id": "5", "device_ip": "-1", "super_device_id": "-2"},  # DCMI has no address for chip 5
        ],
    }
    raw = annotations_of(apiserver, "hccl")["ascend.kubectl.kubernetes.io/ascend-910-configuration"]
    assert raw.startswith('{"pod_name":"hccl","server_id":')  # compact, in Huawei's field order
    # Sorted, comma-joined, whatever order the kubelet and Volcano named them in.
    assert annotations_of(apiserver, "hccl")["huawei.com/kltDev"] == "Ascend910-0,Ascend910-1"
    assert annotations_of(apiserver, "hccl")["huawei.com/AscendReal"] == "Ascend910-4,Ascend910-5"
    assert "left-alone" not in patched  # a pod that carries AscendReal is never rewritten


async def test_the_free_list_leaves_out_the_chips_of_active_pods_and_gets_them_back(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    everything = ",".join(f"Ascend910-{phy}" for phy in range(8))
    # Another pod already holds chip 0 (Pending counts: it is not running yet).
    apiserver.put(
        "pods", volcano_pod("pending", [0], 1, extra_annotations={"huawei.com/AscendReal": "Ascend910-0"})
    )
    apiserver.put("pods", volcano_pod("job", [2, 3], 5))
    settings = volcano_settings(
        node, plugin_dir, kubeconfig, pod_resources.socket, device_info_configmap=True
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        await until(lambda: free_list(apiserver) == everything.replace("Ascend910-0,", ""), "chip 0 held")
        await anyio.to_thread.run_sync(
            pod_resources.admit, "default", "job", RESOURCE, ["Ascend910-5", "Ascend910-6"]
        )
        held = "Ascend910-1,Ascend910-4,Ascend910-5,Ascend910-6,Ascend910-7"
        await until(lambda: free_list(apiserver) == held, "chips 2 and 3 held by the job")
        # The job ends: its chips are free again; the pending pod is deleted: chip 0 too.
        job = apiserver.get("pods", "job", "default")
        assert job is not None
        job["status"] = {"phase": "Succeeded"}
        apiserver.put("pods", job)
        pod_resources.remove("default", "job")
        await until(
            lambda: free_list(apiserver) == everything.replace("Ascend910-0,", ""), "job's chips free"
        )
        apiserver.delete("pods", "pending", "default")
        await until(lambda: free_list(apiserver) == everything, "every chip free")
