"""doctor: another plugin on our socket names, and pods Volcano placed while Volcano mode is off."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DoctorRoot
from fake_apiserver import FakeApiServer
from pod_resources_standin import PodResourcesStandIn
from test_other_plugin_socket import other_plugin
from volcano_harness import volcano_pod

from ascend_plugin.doctor.findings import Status
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

SOCKET = f"{DoctorRoot.PLUGIN_DIR}/Ascend310.sock"  # the 310B board's resource, huawei.com/Ascend310


@pytest.fixture
def another_plugin(doctor_py_root: DoctorRoot) -> Iterator[subprocess.Popen[str]]:
    process = other_plugin(doctor_py_root.host(SOCKET))
    yield process
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


async def test_another_process_on_our_socket_name_is_a_problem(
    doctor_py_root: DoctorRoot, another_plugin: subprocess.Popen[str]
) -> None:
    found = (await doctor_py_root.run())["other-plugins"]
    assert found.status is Status.PROBLEM
    assert found.detail.startswith(
        f"another process serves {doctor_py_root.host(SOCKET)} (pid {another_plugin.pid}"
    )
    assert found.fix is not None
    assert "kubectl -n kube-system delete daemonset <name>" in found.fix


async def test_a_socket_nobody_serves_is_no_problem(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.add_socket(SOCKET)  # bound, not listening: left behind by a plugin that is gone
    found = (await doctor_py_root.run())["other-plugins"]
    assert (found.status, found.detail) == (
        Status.OK,
        f"no other process serves this plugin's socket names ({doctor_py_root.host(SOCKET)})",
    )


@pytest.fixture
def kubelet_pods(doctor_py_root: DoctorRoot, short_tmp: Path) -> Iterator[PodResourcesStandIn]:
    """The kubelet's PodResources API where the doctor's root has it."""
    socket = doctor_py_root.host(DoctorRoot.POD_RESOURCES)
    socket.unlink()
    standin = PodResourcesStandIn(KubeletStandIn(short_tmp / "unused"), socket)
    standin.start()
    yield standin
    standin.stop()


IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}


async def test_pods_volcano_placed_while_volcano_mode_is_off(
    doctor_py_root: DoctorRoot, kubelet_pods: PodResourcesStandIn, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    trainer = volcano_pod("trainer-0", [0], 1700000000, namespace="default")
    trainer["metadata"]["annotations"] = {
        "huawei.com/Ascend310": "Ascend310-0",
        "predicate-time": "1700000000",
    }
    apiserver.put("pods", trainer)
    kubelet_pods.record("default", "trainer-0", "huawei.com/Ascend310", ["Ascend310-0"])
    found = (await doctor_py_root.run(IN_A_POD, kubeconfig=kubeconfig))["volcano-choices"]
    assert found.status is Status.PROBLEM
    assert "default/trainer-0 (huawei.com/Ascend310: Volcano chose Ascend310-0)" in found.detail
    assert found.fix is not None
    assert "volcano=true (--volcano" in found.fix


async def test_pods_without_volcanos_allocation_are_fine(
    doctor_py_root: DoctorRoot, kubelet_pods: PodResourcesStandIn, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    plain = volcano_pod("notebook", None, None, namespace="default")
    apiserver.put("pods", plain)
    kubelet_pods.record("default", "notebook", "huawei.com/Ascend310", ["Ascend310-0"])
    found = (await doctor_py_root.run(IN_A_POD, kubeconfig=kubeconfig))["volcano-choices"]
    assert (found.status, found.detail) == (
        Status.OK,
        "none of the 1 pod(s) holding this node's chips carries Volcano's allocation",
    )


async def test_in_volcano_mode_there_is_nothing_to_check(
    doctor_py_root: DoctorRoot, kubelet_pods: PodResourcesStandIn, kubeconfig: Path
) -> None:
    found = (await doctor_py_root.run(IN_A_POD, kubeconfig=kubeconfig, volcano=True))["volcano-choices"]
    assert (found.status, found.detail) == (
        Status.SKIPPED,
        "Volcano mode is on: the chips handed over are Volcano's choice",
    )
