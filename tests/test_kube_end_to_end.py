"""The whole plugin against the loopback API server and the kubelet stand-in.

Labels, the device-info ConfigMap following a fault, a config edit taking effect
without a restart, Events, and an API server outage that the kubelet never
notices, after which the objects catch up.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import WAIT, until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

NODE = "atlas-200i-a2"
RESOURCE = "huawei.com/Ascend310"
CONFIGMAP = f"mindx-dl-deviceinfo-{NODE}"
CONFIG = "ascend-device-plugin-config"
HEALTHY = {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": []}]}
FAULTY = {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": ["80E01801"]}]}


def device_info(apiserver: FakeApiServer) -> dict[str, Any] | None:
    configmap = apiserver.get("configmaps", CONFIGMAP, "kube-system")
    if configmap is None:
        return None
    parsed: dict[str, Any] = json.loads(configmap["data"]["DeviceInfoCfg"])
    return parsed


def unhealthy_listed(apiserver: FakeApiServer) -> str | None:
    document = device_info(apiserver)
    return None if document is None else document["DeviceInfo"]["DeviceList"][f"{RESOURCE}-Unhealthy"]


def event_reasons(apiserver: FakeApiServer) -> list[str]:
    events = sorted(apiserver.events(), key=lambda event: int(event["metadata"]["resourceVersion"]))
    return [event["reason"] for event in events]


async def test_plugin_with_api_server_labels_configmap_reload_events_and_outage(
    apiserver: FakeApiServer, kubeconfig: Path, kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    apiserver.add_node(NODE, {"kubernetes.io/hostname": NODE})
    apiserver.put("configmaps", {"metadata": {"name": CONFIG, "namespace": "kube-system"}, "data": {}})
    settings = node.settings(
        plugin_dir,
        node_name=NODE,
        kubeconfig=kubeconfig,
        config_configmap=CONFIG,
        pod_namespace="kube-system",
        health_interval=0.1,
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")

        # Labels, including the one 310B nodes never got from Huawei's plugin.
        await until(lambda: "servertype" in apiserver.node_labels(NODE), "node labels")
        labels = apiserver.node_labels(NODE)
        assert labels["accelerator"] == "huawei-Ascend310"
        assert labels["node.kubernetes.io/npu.chip.name"] == "310B1"
        assert labels["servertype"] == "Ascend310B-1"
        assert labels["huawei.com/driver.version"] == "24.1.rc1"
        assert labels["kubernetes.io/hostname"] == NODE

        # The device-info ConfigMap in Huawei's format, with a CheckCode Volcano accepts.
        await until(lambda: device_info(apiserver) is not None, "the device-info ConfigMap")
        document = device_info(apiserver)
        assert document is not None
        canonical = json.dumps(document["DeviceInfo"], separators=(",", ":"), sort_keys=True)
        assert document["CheckCode"] == hashlib.sha256(canonical.encode()).hexdigest()
        assert document["DeviceInfo"]["DeviceList"][RESOURCE] == "Ascend310-0"

        # A fault: the kubelet, the ConfigMap and the node's Events all hear of it.
        node.write(FAULTY)
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", "unhealthy")
        await until(lambda: unhealthy_listed(apiserver) == "Ascend310-0", "the ConfigMap following the fault")
        document = device_info(apiserver)
        assert document is not None
        faults = json.loads(document["DeviceInfo"]["DeviceList"]["huawei.com/Ascend310P-Fault"])
        assert [fault["fault_code"] for fault in faults] == ["80E01801"]
        await until(lambda: event_reasons(apiserver) == ["NPUUnhealthy"], "the NPUUnhealthy event")

        # A config edit changes the health interval of the running plugin.
        apiserver.put(
            "configmaps",
            {"metadata": {"name": CONFIG, "namespace": "kube-system"}, "data": {"health_interval": "0.3"}},
        )
        await until(lambda: app.config.settings.health_interval == 0.3, "the reloaded interval")
        assert app.monitor is not None
        assert app.monitor.policy().interval == 0.3

        # The API server goes away: nothing changes for the kubelet.
        registrations = len(kubelet.registrations)
        await apiserver.stop()
        node.write(HEALTHY)
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Healthy", "healthy again")
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
        assert response.container_responses
        assert len(kubelet.registrations) == registrations
        assert kubelet.resources[RESOURCE].stream_open
        assert app.ready

        # It returns: the ConfigMap and the Events catch up, the labels are still kept.
        await apiserver.start()
        await until(lambda: unhealthy_listed(apiserver) == "", "the ConfigMap catching up")
        await until(
            lambda: event_reasons(apiserver) == ["NPUUnhealthy", "NPUHealthy"], "the NPUHealthy event"
        )
        node_object = apiserver.get("nodes", NODE)
        assert node_object is not None
        del node_object["metadata"]["labels"]["accelerator"]
        apiserver.put("nodes", node_object)
        await until(
            lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-Ascend310", "label put back"
        )


async def test_the_command_line_plugin_publishes_and_stops_cleanly(
    apiserver: FakeApiServer, kubeconfig: Path, kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    apiserver.add_node(NODE)
    command = [
        *(sys.executable, "-m", "ascend_plugin", "run", "--backend", "fake"),
        *("--fake-scenario", str(node.scenario), "--device-plugin-path", str(plugin_dir)),
        *("--host-root", str(node.host_root), "--health-interval", "0.1", "--http-address", ""),
        *("--node-name", NODE, "--kubeconfig", str(kubeconfig)),
    ]
    with (plugin_dir.parent / "plugin.log").open("wb") as log:
        process = await anyio.open_process(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            await wait_for(kubelet, registered(RESOURCE), "registration")
            await until(lambda: "accelerator" in apiserver.node_labels(NODE), "node labels")
            await until(lambda: device_info(apiserver) is not None, "the device-info ConfigMap")
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(WAIT):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
            await process.aclose()
