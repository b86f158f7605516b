"""doctor, the kubelet: its device-plugin directory is usable and kubelet.sock is a socket."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

import pytest
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Status
from ascend_plugin.instance_lock import InstanceLock

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


async def test_the_instance_lock_is_free_while_no_plugin_serves(
    doctor_py_root: DoctorRoot,
) -> None:
    found = (await doctor_py_root.run())["instance-lock"]
    assert found.status is Status.OK
    assert found.detail == (
        f"no plugin instance holds the lock on {doctor_py_root.host(DoctorRoot.PLUGIN_DIR)}: "
        "one started now serves it"
    )


async def test_the_instance_holding_the_lock_is_named_from_its_note(doctor_py_root: DoctorRoot) -> None:
    directory = doctor_py_root.host(DoctorRoot.PLUGIN_DIR)
    holder = InstanceLock(directory)
    await holder.acquire()
    try:
        found = (await doctor_py_root.run())["instance-lock"]
    finally:
        holder.release()
    assert found.status is Status.OK
    assert found.detail.startswith(
        f"the lock on {directory} is held by pid {os.getpid()} (host {socket.gethostname()}, since "
    )
    assert found.detail.endswith("that instance serves this node, and one started now waits until it exits")
    assert (await doctor_py_root.run())["instance-lock"].detail.startswith("no plugin instance holds")


async def test_a_lock_held_without_a_note_is_still_reported_held(doctor_py_root: DoctorRoot) -> None:
    directory = doctor_py_root.host(DoctorRoot.PLUGIN_DIR)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # an instance that lost its note (an old kubelet wiped the directory)
        found = (await doctor_py_root.run())["instance-lock"]
    finally:
        os.close(fd)
    assert found.detail.startswith(f"the lock on {directory} is held by a process that left no holder note")


async def test_with_serve_dra_the_driver_s_directory_is_the_one_looked_at(doctor_py_root: DoctorRoot) -> None:
    dra_dir = "/var/lib/kubelet/plugins/npu.huawei.com"
    doctor_py_root.add_directories(dra_dir)
    found = (await doctor_py_root.run(serve="dra", dra_plugin_path=Path(dra_dir)))["instance-lock"]
    assert found.detail == (
        f"no plugin instance holds the lock on {doctor_py_root.host(dra_dir)}: one started now serves it"
    )
