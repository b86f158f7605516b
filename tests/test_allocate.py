"""Allocate and GetPreferredAllocation, through the kubelet stand-in (grpcio) on the wire."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def test_device_mode_hands_over_the_310b_nodes_that_exist(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    node.add_host_paths("/usr/local/Ascend/driver/lib64/libascend_hal.so")
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
    container = response.container_responses[0]
    specs = {spec.host_path: (spec.container_path, spec.permissions) for spec in container.devices}
    assert specs == {
        "/dev/davinci0": ("/dev/davinci0", "rw"),
        # The 310B prefers the docker flavour of the manager node, seen as the usual path inside.
        "/dev/davinci_manager_docker": ("/dev/davinci_manager", "rw"),
        "/dev/hisi_hdc": ("/dev/hisi_hdc", "rw"),
        "/dev/devmm_svm": ("/dev/devmm_svm", "rw"),
        "/dev/svm0": ("/dev/svm0", "rw"),
        "/dev/vpc": ("/dev/vpc", "rw"),
    }
    assert [(m.host_path, m.container_path, m.read_only) for m in container.mounts] == [
        ("/usr/local/Ascend/driver", "/usr/local/Ascend/driver", True)
    ]
    assert dict(container.envs) == {}


async def test_runtime_mode_sets_the_ascend_docker_runtime_env(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir, allocate_mode="runtime")):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
    container = response.container_responses[0]
    assert dict(container.envs) == {
        "ASCEND_VISIBLE_DEVICES": "0",
        "ASCEND_RUNTIME_OPTIONS": "",
        "ASCEND_ALLOW_LINK": "True",
    }
    assert list(container.devices) == []


def refusal_logged(caplog: pytest.LogCaptureFixture, label: str, status: grpc.StatusCode) -> bool:
    """A line logged the refusal with its label and status as structured fields."""
    return any(
        getattr(record, "reason", None) == label and getattr(record, "status", None) == status.name
        for record in caplog.records
    )


# The label is the refusal's ``reason`` field: "shape" for what the wire check refuses before decoding.
@pytest.mark.parametrize(
    ("ids", "status", "label", "message"),
    [
        (["Ascend310-7"], grpc.StatusCode.INVALID_ARGUMENT, "unknown", "'Ascend310-7' is not on this node"),
        (
            ["Ascend310-0", "Ascend310-0"],
            grpc.StatusCode.INVALID_ARGUMENT,
            "duplicate",
            "'Ascend310-0' appears twice",
        ),
        (["Ascend910-0"], grpc.StatusCode.INVALID_ARGUMENT, "malformed", "'Ascend910-0' is malformed"),
        (["Ascend310-01"], grpc.StatusCode.INVALID_ARGUMENT, "malformed", "'Ascend310-01' is malformed"),
        (
            ["x" * 300],
            grpc.StatusCode.INVALID_ARGUMENT,
            "shape",
            "is 300 bytes long; device IDs have at most 50",
        ),
        (["x" * 51], grpc.StatusCode.INVALID_ARGUMENT, "shape", "is 51 bytes long"),
        (["x" * 50], grpc.StatusCode.INVALID_ARGUMENT, "malformed", "is malformed"),
        (
            ["Ascend310-0", "Ascend310-1", "Ascend310-0"],
            grpc.StatusCode.INVALID_ARGUMENT,
            "shape",
            "has more entries than the 2 huawei.com/Ascend310 device(s) on this node",
        ),
        ([], grpc.StatusCode.INVALID_ARGUMENT, "empty", "names no device IDs"),
    ],
)
async def test_bad_ids_are_refused_naming_the_id(
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    caplog: pytest.LogCaptureFixture,
    ids: list[str],
    status: grpc.StatusCode,
    label: str,
    message: str,
) -> None:
    node.write({"chip_name": "310B1", "chips": [{"phy_id": 0}, {"phy_id": 1}]})
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        with pytest.raises(grpc.RpcError) as refused:
            await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ids)
        # The plugin keeps serving after a refusal.
        ok = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
    assert refused.value.code() == status
    assert message in refused.value.details()
    assert refusal_logged(caplog, label, status)
    assert ok.container_responses[0].devices


async def test_an_unhealthy_device_is_refused_with_its_reason(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "fault_codes": ["80E01801"]}]})
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", "unhealthy")
        with pytest.raises(grpc.RpcError) as refused:
            await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "Ascend310-0 is unhealthy: fault 80E01801:RestartBusiness" in refused.value.details()
    assert refusal_logged(caplog, "unhealthy", grpc.StatusCode.FAILED_PRECONDITION)


async def test_preferred_allocation_honours_must_include_and_size(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    node.write({"chip_name": "310", "chips": [{"phy_id": n, "card_id": 3, "device_id": n} for n in range(4)]})
    available = [f"Ascend310-{n}" for n in range(4)]
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        chosen = await anyio.to_thread.run_sync(
            kubelet.preferred_allocation, RESOURCE, available, ["Ascend310-3"], 2
        )
        everything = await anyio.to_thread.run_sync(kubelet.preferred_allocation, RESOURCE, available, [], 9)
    assert len(chosen) == 2
    assert "Ascend310-3" in chosen
    assert set(chosen) <= set(available)
    assert sorted(everything) == available
