"""doctor, the kubelet: its device-plugin directory is usable and kubelet.sock is a socket."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Status

pytestmark = pytest.mark.anyio

SOCKET = f"{DoctorRoot.PLUGIN_DIR}/kubelet.sock"


async def test_a_running_kubelet_is_found(doctor_py_root: DoctorRoot) -> None:
    found = await doctor_py_root.run()
    assert found["kubelet-directory"].status is Status.OK
    assert (
        found["kubelet-socket"].detail
        == f"{doctor_py_root.host(SOCKET)} is the kubelet's registration socket"
    )


async def test_a_missing_directory_names_the_chart_value_and_skips_the_socket(
    doctor_py_root: DoctorRoot,
) -> None:
    doctor_py_root.remove(DoctorRoot.PLUGIN_DIR)
    found = await doctor_py_root.run()
    directory = found["kubelet-directory"]
    assert directory.status is Status.PROBLEM
    assert directory.detail == f"{doctor_py_root.host(DoctorRoot.PLUGIN_DIR)} is not a directory"
    assert directory.fix is not None
    assert "Helm kubeletDevicePluginPath" in directory.fix
    assert "--device-plugin-path <directory>" in directory.fix
    assert "settings.devicePluginPath" not in directory.fix  # the chart has no such value
    assert found["kubelet-socket"].detail == "not checked: kubelet-directory did not pass"


async def test_no_kubelet_socket_means_no_kubelet_there(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove(SOCKET)
    kubelet_socket = (await doctor_py_root.run())["kubelet-socket"]
    assert kubelet_socket.status is Status.PROBLEM
    assert "no kubelet is serving the device-plugin API" in kubelet_socket.detail


async def test_a_plain_file_is_not_the_kubelets_socket(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove(SOCKET)
    doctor_py_root.add_files(SOCKET)
    kubelet_socket = (await doctor_py_root.run())["kubelet-socket"]
    assert kubelet_socket.status is Status.PROBLEM
    assert kubelet_socket.detail.endswith("exists but is not a socket")


async def test_the_configured_directory_is_the_one_checked(doctor_py_root: DoctorRoot) -> None:
    elsewhere = "/var/lib/k0s/kubelet/device-plugins"
    doctor_py_root.add_directories(elsewhere)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(doctor_py_root.host(f"{elsewhere}/kubelet.sock")))
        found = await doctor_py_root.run(device_plugin_path=Path(elsewhere))
    assert found["kubelet-directory"].detail.startswith(str(doctor_py_root.host(elsewhere)))
    assert found["kubelet-socket"].status is Status.OK
