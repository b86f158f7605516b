"""The node's ResourceSlices: content, the API's limits, back after a wipe, never twice after a restart."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import kubernetes_validate
import pytest
from dra_harness import (
    A1_SERVER,
    A2_SERVER,
    DRIVER,
    NODE,
    DraNode,
    device_names,
    make_dra_node,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
)
from fake_apiserver import FakeApiServer
from kube_harness import make_inventory, running, set_faults
from waiting import WAIT, until, wait_for

from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.slices import SliceController
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.kubeapi.client import RESOURCE_SLICES, Kube
from ascend_plugin.kubeapi.errors import ApiError
from backends.pci import PCI_DEVICES

pytestmark = pytest.mark.anyio


def ours(apiserver: FakeApiServer) -> list[dict[str, Any]]:
    return apiserver.slices(DRIVER, NODE)


async def published(apiserver: FakeApiServer, names: list[str]) -> list[dict[str, Any]]:
    await until(lambda: device_names(ours(apiserver)) == names, f"the slices carry {names}")
    return ours(apiserver)


EIGHT = [f"npu-{phy}" for phy in range(8)]


async def test_one_pool_named_after_the_node_owned_by_it(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    node = apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        (slice_,) = await published(apiserver, EIGHT)
    metadata, spec = slice_["metadata"], slice_["spec"]
    assert metadata["generateName"] == "npu.huawei.com-npu-node-1-"
    assert metadata["name"].startswith("npu.huawei.com-npu-node-1-")
    assert metadata["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"], "controller": True}
    ]
    assert (spec["driver"], spec["nodeName"]) == (DRIVER, NODE)
    assert spec["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    kubernetes_validate.validate(slice_, "1.34", strict=True)


async def test_what_each_device_says_about_its_chip(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        (slice_,) = await published(apiserver, EIGHT)
    device = slice_["spec"]["devices"][5]
    assert device == {
        "name": "npu-5",
        "attributes": {
            "family": {"string": "910"},
            "chipName": {"string": "910B3"},
            "aiCores": {"int": 20},
            "phyID": {"int": 5},
            "cardID": {"int": 5},
            "deviceID": {"int": 0},
            "driverVersion": {"string": "24.1.rc1"},
            "topologyUnit": {"string": "mesh-0"},
            "topologyKind": {"string": "mesh"},
            "topologyUnitSize": {"int": 8},
            # No sysfs under the fake host root: the address's own domain and bus stand in.
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:c6"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:c6:00.0"},
        },
        "capacity": {"memory": {"value": "64Gi"}},
    }


async def test_rings_of_a_first_generation_server(
    short_tmp: Path, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """``topologyUnit`` is what a claim's matchAttribute constraint compares: one value per HCCS ring."""
    node = make_dra_node(short_tmp / "a1", A1_SERVER)
    apiserver.add_node(NODE)
    async with running_driver(node.settings(kubeconfig)):
        (slice_,) = await published(apiserver, EIGHT)
    units = [
        (
            device["attributes"]["topologyUnit"]["string"],
            device["attributes"]["topologyKind"]["string"],
            device["attributes"]["topologyUnitSize"]["int"],
        )
        for device in slice_["spec"]["devices"]
    ]
    assert units == [("ring-0", "ring", 4)] * 4 + [("ring-1", "ring", 4)] * 4
    assert {device["capacity"]["memory"]["value"] for device in slice_["spec"]["devices"]} == {"32Gi"}
    assert {device["attributes"]["aiCores"]["int"] for device in slice_["spec"]["devices"]} == {32}


async def test_a_soc_board_has_no_pcie_attributes(
    short_tmp: Path, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    node = make_dra_node(
        short_tmp / "soc", {"chip_name": "310B1", "memory_mb": 3072, "chips": [{"phy_id": 0}]}
    )
    apiserver.add_node(NODE)
    async with running_driver(node.settings(kubeconfig)):
        (slice_,) = await published(apiserver, ["npu-0"])
    device = slice_["spec"]["devices"][0]
    assert not {"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/pciBusID", "numaNode"} & set(
        device["attributes"]
    )
    assert device["attributes"]["family"] == {"string": "310B"}
    assert device["attributes"]["aiCores"] == {"int": 1}
    assert device["attributes"]["topologyUnit"] == {"string": "card-0"}
    assert device["capacity"] == {"memory": {"value": "3Gi"}}


async def test_pcie_root_and_numa_node_come_from_the_host_s_sysfs(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """Chips under one root complex share ``resource.kubernetes.io/pcieRoot``, as the attribute means."""
    for phy in range(8):
        _sysfs_device(
            dra_node.host_root,
            f"0000:{0xC1 + phy:02x}:00.0",
            "pci0000:c0" if phy < 4 else "pci0000:80",
            phy // 4,
        )
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        (slice_,) = await published(apiserver, EIGHT)
    roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in slice_["spec"]["devices"]]
    numa = [d["attributes"]["numaNode"]["int"] for d in slice_["spec"]["devices"]]
    assert roots == ["pci0000:c0"] * 4 + ["pci0000:80"] * 4
    assert numa == [0] * 4 + [1] * 4


def _sysfs_device(host_root: Path, bdf: str, root_complex: str, numa: int) -> None:
    """``<host>/sys/bus/pci/devices/<bdf>``: a link into ``/sys/devices/<root complex>``, with a NUMA node."""
    target = host_root / "sys/devices" / root_complex / "0000:c0:02.0" / bdf
    target.mkdir(parents=True)
    (target / "numa_node").write_text(f"{numa}\n")
    link = host_root / PCI_DEVICES / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


@pytest.fixture
async def big_node_slices(
    short_tmp: Path, kube: Kube, apiserver: FakeApiServer
) -> AsyncIterator[SliceController]:
    """A controller for a node of 130 chips (more than one slice holds), publishing to the fake API server."""
    apiserver.add_node(NODE)
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=range(130))
    controller = SliceController(kube, DeviceCatalog(inventory, DRIVER), NODE)
    async with running(controller.run):
        yield controller


async def test_more_chips_than_a_slice_holds_go_into_two_slices_of_one_pool(
    big_node_slices: SliceController, apiserver: FakeApiServer
) -> None:
    await until(lambda: len(device_names(ours(apiserver))) == 130, "130 devices published")
    slices = sorted(ours(apiserver), key=lambda s: len(s["spec"]["devices"]), reverse=True)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 2]
    assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in slices} == {
        (1, 2)
    }
    assert sorted(device_names(slices), key=lambda name: int(name[4:])) == [
        f"npu-{phy}" for phy in range(130)
    ]


async def test_the_api_server_refuses_a_slice_over_the_limit(kube: Kube, apiserver: FakeApiServer) -> None:
    """The fake keeps the API's limit, so the split above is what makes the publication pass."""
    devices = [{"name": f"npu-{phy}"} for phy in range(129)]
    body = {
        "metadata": {"generateName": "x-"},
        "spec": {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    with pytest.raises(ApiError, match=r"spec.devices: Too many: 129: must have at most 128 items") as raised:
        await kube.create(RESOURCE_SLICES, "", body)
    assert raised.value.status == 422


async def test_wiped_slices_are_put_back(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """The kubelet deletes a node's slices when it starts: the watch sees them go and they come back."""
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        (first,) = await published(apiserver, EIGHT)
        assert apiserver.wipe_slices(NODE) == 1
        await until(
            lambda: ours(apiserver) and ours(apiserver)[0]["metadata"]["name"] != first["metadata"]["name"],
            "a new slice",
        )
        (second,) = await published(apiserver, EIGHT)
    assert second["spec"]["pool"]["generation"] > first["spec"]["pool"]["generation"]
    assert second["spec"]["devices"] == first["spec"]["devices"]


async def test_a_restarted_driver_adopts_its_slices_instead_of_publishing_twice(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        (before,) = await published(apiserver, EIGHT)
    creates = len(apiserver.requests_of("create", "resourceslices"))
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await until(
            lambda: app.dra is not None and app.dra.slices is not None and app.dra.slices.in_sync,
            "the new driver compared its slices",
        )
        assert [s["metadata"]["name"] for s in ours(apiserver)] == [before["metadata"]["name"]]
    assert len(apiserver.requests_of("create", "resourceslices")) == creates
    assert ours(apiserver)[0]["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_nothing_is_written_while_the_slices_are_right(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """A change of the chips that publishes nothing new (a SubHealth fault: still healthy) writes nothing."""
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await published(apiserver, EIGHT)
        dra = app.dra
        assert dra is not None
        await until(lambda: dra.slices is not None and dra.slices.in_sync, "in sync")
        assert dra.slices is not None
        writes, looks = dra.slices.writes, dra.slices.looks
        dra_node.set_faults({2: ["81A3880C"]})  # SubHealthFault: still healthy
        await until(
            lambda: app.inventory is not None and app.inventory.get(2).health.faults, "the fault seen"
        )
        await until(lambda: dra.slices is not None and dra.slices.looks > looks, "the slices looked at again")
        assert dra.slices.writes == writes
    assert len(apiserver.requests_of("update", "resourceslices")) == 0


async def test_stray_slices_of_this_driver_on_this_node_go_and_others_stay(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    """A slice of ours under another pool name (a renamed node's) is removed; another driver's is not ours."""
    apiserver.add_node(NODE)
    for name, driver, pool in (("stale", DRIVER, "old-name"), ("gpu", "gpu.example.com", NODE)):
        apiserver.put(
            "resourceslices",
            {
                "metadata": {"name": name},
                "spec": {
                    "driver": driver,
                    "nodeName": NODE,
                    "pool": {"name": pool, "generation": 3, "resourceSliceCount": 1},
                    "devices": [{"name": "dev-0"}],
                },
            },
        )
    async with running_driver(dra_node.settings(kubeconfig)):
        await published(apiserver, EIGHT)
        await until(lambda: apiserver.get("resourceslices", "stale") is None, "the stray deleted")
    assert apiserver.get("resourceslices", "gpu") is not None
    assert ours(apiserver)[0]["spec"]["pool"]["generation"] == 1


async def test_a_chip_split_into_vnpus_is_never_published_or_prepared_whole(
    short_tmp: Path, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet_for: Any
) -> None:
    """Its vNPUs' pods would share the silicon with the pod given the whole chip."""
    scenario = {**A2_SERVER, "chips": [dict(chip) for chip in A2_SERVER["chips"]]}
    scenario["chips"][0]["vdevs"] = [{"vdev_id": 100, "template": "vir10_3c_32g"}]
    node = make_dra_node(short_tmp / "split", scenario)
    apiserver.add_node(NODE)
    kubelet = await dra_kubelet_for(node)
    async with running_driver(node.settings(kubeconfig)):
        await published(apiserver, EIGHT[1:])
        await wait_for(kubelet, registered, "registered")
        claim = put_claim(apiserver, "whole", [result("npu-0")])
        refused = (await prepare(kubelet, claim)).claims[claim[2]].error
        assert "device npu-0 is split into vNPUs; a chip that carries vNPUs is never given whole" in refused


async def test_resource_versions_that_are_not_numbers_publish_once_and_update_in_place(
    short_tmp: Path, kube: Kube, apiserver: FakeApiServer
) -> None:
    """The API promises clients equality of resourceVersions only: the controller never orders them."""
    apiserver.opaque_versions = True
    apiserver.add_node(NODE)
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=range(4))
    controller = SliceController(kube, DeviceCatalog(inventory, DRIVER), NODE)
    async with running(controller.run):
        (first,) = await published(apiserver, [f"npu-{phy}" for phy in range(4)])
        assert not first["metadata"]["resourceVersion"].isdigit()
        set_faults(inventory, "Ascend910-2", (0x80E01801, FaultLevel.SeparateNPU))
        (second,) = await published(apiserver, ["npu-0", "npu-1", "npu-3"])
        assert apiserver.wipe_slices(NODE) == 1
        await until(
            lambda: ours(apiserver) and ours(apiserver)[0]["metadata"]["name"] != first["metadata"]["name"],
            "put back",
        )
        await until(lambda: controller.in_sync, "in sync")
    assert second["metadata"]["name"] == first["metadata"]["name"]  # updated in place
    assert len(apiserver.requests_of("create", "resourceslices")) == 2  # the first and the one after the wipe
    assert len(ours(apiserver)) == 1


async def test_published_returns_once_the_slices_show_the_chips_as_of_a_version(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    """A hot reset takes its chips out and waits here: the slices have left them out by then."""
    apiserver.add_node(NODE)
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=range(4))
    controller = SliceController(kube, DeviceCatalog(inventory, DRIVER), NODE)
    async with running(controller.run):
        with anyio.fail_after(WAIT):
            await controller.published(inventory.version)
        assert device_names(ours(apiserver)) == [f"npu-{phy}" for phy in range(4)]
        inventory.set_resetting([0, 1], True)
        with anyio.fail_after(WAIT):
            await controller.published(inventory.version)
        assert device_names(ours(apiserver)) == ["npu-2", "npu-3"]
        inventory.set_resetting([0, 1], False)
        with anyio.fail_after(WAIT):
            await controller.published(inventory.version)
        assert device_names(ours(apiserver)) == [f"npu-{phy}" for phy in range(4)]
