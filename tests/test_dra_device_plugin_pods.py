"""A node moved from the device plugin to DRA: a chip a device-plugin pod still holds is never offered.

The kubelet keeps listing the device IDs a device plugin gave a pod for as long as
the pod runs, after that plugin is gone (PodResources). The DRA driver reads them
(this plugin's IDs and Huawei's are the same) and leaves those chips out of its
ResourceSlices from its very first publication until the pod ends; chips that
claims hold stay published, and a kubelet that cannot be asked does not stop the
driver from publishing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from dra_harness import DRIVER, NODE, DraNode, device_names, running_driver
from fake_apiserver import FakeApiServer
from pod_resources_standin import PodResourcesStandIn
from waiting import until

from ascend_plugin.holdings.held import DevicePluginIds

pytestmark = pytest.mark.anyio

EIGHT = [f"npu-{phy}" for phy in range(8)]


def published_ever(apiserver: FakeApiServer) -> set[str]:
    """Every device any ResourceSlice of the node held at any time (the server's whole history)."""
    return {
        device["name"]
        for change in apiserver.history
        if change.resource == "resourceslices"
        for device in change.object.get("spec", {}).get("devices") or []
    }


def settings(dra_node: DraNode, kubeconfig: Path, pod_resources: PodResourcesStandIn) -> Any:
    return dra_node.settings(kubeconfig, pod_resources_socket=pod_resources.socket)


async def test_a_chip_a_device_plugin_pod_holds_is_left_out_until_the_pod_ends(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    pod_resources: PodResourcesStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin.faces.dra.slices")
    apiserver.add_node(NODE)
    # Admitted by the device plugin before the node moved: Huawei's IDs, a whole chip and two.
    pod_resources.record("training", "resnet-0", "huawei.com/Ascend910", ["Ascend910-3"])
    pod_resources.record("training", "bert-0", "huawei.com/Ascend910", ["Ascend910-5", "Ascend910-6"])
    async with running_driver(settings(dra_node, kubeconfig, pod_resources)):
        without = [name for name in EIGHT if name not in ("npu-3", "npu-5", "npu-6")]
        await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == without, "published without them")
        assert not {"npu-3", "npu-5", "npu-6"} & published_ever(apiserver), "never offered, not even at first"
        assert (
            "chip 3 is held by device-plugin pod(s) training/resnet-0: it is left out of pool" in caplog.text
        )
        pod_resources.remove("training", "resnet-0")
        await until(lambda: "npu-3" in device_names(apiserver.slices(DRIVER, NODE)), "npu-3 offered again")
        assert "npu-5" not in device_names(apiserver.slices(DRIVER, NODE))
    assert "chip 3 is no longer held by a device-plugin pod" in caplog.text


async def test_chips_claims_hold_stay_published(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, pod_resources: PodResourcesStandIn
) -> None:
    """A DRA claim's device is the driver's own allocation: leaving it out would be a lie about the pool."""
    apiserver.add_node(NODE)
    pod_resources.claim("default", "job", "npus", [(DRIVER, NODE, "npu-2")])
    pod_resources.record("training", "resnet-0", "huawei.com/Ascend910", ["Ascend910-4"])
    async with running_driver(settings(dra_node, kubeconfig, pod_resources)):
        expected = [name for name in EIGHT if name != "npu-4"]
        await until(
            lambda: device_names(apiserver.slices(DRIVER, NODE)) == expected, "npu-2 stays, npu-4 out"
        )


async def test_without_an_answer_from_the_kubelet_the_pool_is_published_whole(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    absent = short_tmp / "no-kubelet" / "kubelet.sock"
    async with running_driver(dra_node.settings(kubeconfig, pod_resources_socket=absent)):
        await until(lambda: device_names(apiserver.slices(DRIVER, NODE)) == EIGHT, "every chip published")


IDS = DevicePluginIds("huawei.com/Ascend910", "Ascend910", frozenset(range(8)))


@pytest.mark.parametrize(
    ("resource", "device_id", "chip"),
    [
        ("huawei.com/Ascend910", "Ascend910-3", 3),  # a whole chip
        ("huawei.com/Ascend910", "Ascend910-7-2", 7),  # a share of one
        ("huawei.com/Ascend910-4c", "Ascend910-4c-101-6", 6),  # a static vNPU: <prefix>-<suffix>-<vdev>-<phy>
        ("huawei.com/Ascend910-10c.3cpu.32g", "Ascend910-10c.3cpu.32g-100-0", 0),
        ("huawei.com/Ascend910", "Ascend910-9", None),  # another node's chip
        ("huawei.com/Ascend310P", "Ascend310P-3", None),  # another family's resource
        ("huawei.com/Ascend910", "npu-3", None),  # not a device plugin's ID
        ("huawei.com/Ascend9100", "Ascend9100-1", None),  # a name that only starts alike
    ],
)
def test_a_device_plugin_id_names_its_chip(resource: str, device_id: str, chip: int | None) -> None:
    assert IDS.chip_of(resource, device_id) == chip
