"""Health through DRA: unhealthy chips leave the slice, or stay tainted where the cluster has DRADeviceTaints;
the health stream carries every device each time."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from dra_harness import DRIVER, NODE, DraNode, device_names, registered, running_driver
from fake_apiserver import FakeApiServer
from grpclib.testing import ChannelFor
from kube_harness import make_inventory, set_faults
from log_records import records
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.dra.services import REPORT_TIMEOUT, DeviceHealthService
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.kubelet_api.v1alpha1 import DraResourceHealthStub, HealthStatus, NodeWatchResourcesRequest
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.resource_api import DEVICE_TAINTS

pytestmark = pytest.mark.anyio

EIGHT = [f"npu-{phy}" for phy in range(8)]


def devices(apiserver: FakeApiServer) -> dict[str, dict[str, Any]]:
    return {device["name"]: device for s in apiserver.slices(DRIVER, NODE) for device in s["spec"]["devices"]}


def generation(apiserver: FakeApiServer) -> int:
    (slice_,) = apiserver.slices(DRIVER, NODE)
    value: int = slice_["spec"]["pool"]["generation"]
    return value


async def test_an_unhealthy_chip_leaves_the_slice_and_comes_back(
    dra_driver: PluginApp, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    """With the default gates of 1.34 and 1.35 a taint would be dropped: the chip leaves instead."""
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
    first = generation(apiserver)
    dra_node.set_faults({3: ["80818C00"]})
    await until(lambda: "npu-3" not in devices(apiserver), "npu-3 left the slice")
    assert device_names(apiserver.slices(DRIVER, NODE)) == [name for name in EIGHT if name != "npu-3"]
    left = generation(apiserver)
    assert left > first
    dra_node.set_faults({})
    await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "npu-3 back")
    assert generation(apiserver) > left
    assert all("taints" not in device for device in devices(apiserver).values())


@pytest.fixture
def levels_file(short_tmp: Path) -> Path:
    """A fault table with one code at RestartRequest, a level whose remedy leaves the chip alone."""
    path = short_tmp / "levels.json"
    path.write_text(json.dumps({"RestartRequest": ["80CB8009"]}), encoding="utf-8")
    return path


async def test_with_device_taints_unhealthy_chips_stay_with_the_taint_their_fault_calls_for(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    levels_file: Path,
) -> None:
    apiserver.gates[DEVICE_TAINTS] = True
    apiserver.add_node(NODE)
    settings = dra_node.settings(kubeconfig, dra_device_taints=True, fault_levels_file=levels_file)
    async with running_driver(settings):
        await wait_for(dra_kubelet, registered, "registered")
        await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
        dra_node.set_faults({1: ["80818C00"], 2: ["80CB8009"], 6: ["40F84E00"]})
        await until(
            lambda: sum("taints" in d for d in devices(apiserver).values()) == 3, "three chips tainted"
        )
        taints = {name: device["taints"] for name, device in devices(apiserver).items() if "taints" in device}
        assert device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "tainted chips stay in the slice"
        assert {
            name: [(t["key"], t["value"], t["effect"]) for t in found] for name, found in taints.items()
        } == {
            "npu-1": [("npu.huawei.com/unhealthy", "SeparateNPU", "NoExecute")],
            "npu-2": [("npu.huawei.com/unhealthy", "RestartRequest", "NoSchedule")],
            "npu-6": [("npu.huawei.com/unhealthy", "RestartNPU", "NoExecute")],
        }
        assert all("timeAdded" in found[0] for found in taints.values())
        stamped = taints["npu-1"][0]["timeAdded"]
        dra_node.set_faults({1: ["80818C00"], 6: ["40F84E00"]})
        await until(lambda: "taints" not in devices(apiserver)["npu-2"], "npu-2 healthy again")
        assert devices(apiserver)["npu-1"]["taints"][0]["timeAdded"] == stamped, "a kept taint keeps its time"


async def test_a_chip_without_a_fault_code_to_explain_it_only_blocks_scheduling(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.gates[DEVICE_TAINTS] = True
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, dra_device_taints=True)):
        await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
        scenario = dra_node.read()
        scenario["chips"][4]["health"] = 2  # a major alarm, no code
        dra_node.write(scenario)
        await until(lambda: "taints" in devices(apiserver)["npu-4"], "npu-4 tainted")
        taint = devices(apiserver)["npu-4"]["taints"][0]
        assert (taint["value"], taint["effect"]) == ("Unhealthy", "NoSchedule")


async def test_taints_the_api_server_drops_are_said_once_and_the_chips_leave_instead(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """dra_device_taints on, the gate off (the default of 1.34 and 1.35): the server silently drops them."""
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig, dra_device_taints=True)):
        await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "published")
        dra_node.set_faults({0: ["80818C00"]})
        await until(lambda: "npu-0" not in devices(apiserver), "npu-0 left the slice")
        dra_node.set_faults({0: ["80818C00"], 7: ["80818C00"]})
        await until(lambda: "npu-7" not in devices(apiserver), "npu-7 left the slice")
    (said,) = records(caplog, "ascend_plugin.faces.dra.slices", level=logging.WARNING, pool=NODE)
    # What the operator can do about it: the feature gate to enable, or the setting to turn off.
    assert "DRADeviceTaints" in said.getMessage()
    assert "dra_device_taints" in said.getMessage()


async def test_the_health_stream_carries_every_device_and_each_change(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode
) -> None:
    await wait_for(dra_kubelet, lambda k: len(k.drivers[DRIVER].health) == 8, "eight devices reported")
    reports = dra_kubelet.drivers[DRIVER].health
    assert sorted(name for _, name in reports) == sorted(EIGHT)
    assert {pool for pool, _ in reports} == {NODE}
    assert {report.health for report in reports.values()} == {"HEALTHY"}
    assert {report.timeout for report in reports.values()} == {REPORT_TIMEOUT}
    dra_node.set_faults({3: ["80818C00"]})

    def npu_3_unhealthy(kubelet: DraKubeletStandIn) -> bool:
        return kubelet.drivers[DRIVER].health[(NODE, "npu-3")].health == "UNHEALTHY"

    await wait_for(dra_kubelet, npu_3_unhealthy, "npu-3 reported unhealthy")
    reports = dra_kubelet.drivers[DRIVER].health
    assert len(reports) == 8, "every message is the complete list"
    assert "fault 80818C00" in reports[(NODE, "npu-3")].message
    assert {reports[(NODE, name)].health for name in EIGHT if name != "npu-3"} == {"HEALTHY"}


async def test_the_stream_repeats_the_list_when_nothing_changes(short_tmp: Path) -> None:
    """The kubelet counts a report stale after its timeout: a quiet node still reports, every heartbeat."""
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1))
    service = DeviceHealthService(inventory, NODE, heartbeat=0.01, clock=lambda: 1_700_000_000.0)
    received: list[list[tuple[str, HealthStatus, int]]] = []
    async with ChannelFor([service]) as channel:
        stub = DraResourceHealthStub(channel)
        with anyio.fail_after(15):
            async for message in stub.node_watch_resources(NodeWatchResourcesRequest()):
                received.append(
                    [
                        (d.device.device_name, d.health, d.last_updated_time)
                        for d in message.devices
                        if d.device
                    ]
                )
                if len(received) == 3:
                    set_faults(inventory, "Ascend910-1", (0x80E01801, FaultLevel.SeparateNPU))
                if len(received) == 5:
                    service.streams.stop()
    assert received[0] == [
        ("npu-0", HealthStatus.HEALTHY, 1_700_000_000),
        ("npu-1", HealthStatus.HEALTHY, 1_700_000_000),
    ]
    assert received[1] == received[0], "a heartbeat without any change"
    assert received[-1][1][1] == HealthStatus.UNHEALTHY
    assert service.streams.count == 0
