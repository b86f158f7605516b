"""doctor, hot reset: whether it is on, whether the driver can do it, and what it would do now.

Four 910B3 chips (one reset group): chip 0 at RestartNPU, a process on chip 2,
chip 3 separated. The finding names what the plugin's rules would do about
each, from the chips as they are read now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import DoctorRoot
from hot_reset_harness import RESTART_NPU, SEPARATE_NPU, levels_file, node_scenario

from ascend_plugin.doctor.findings import Finding, Status
from ascend_plugin.doctor.hot_reset import HOT_RESET
from ascend_plugin.doctor.runner import CHECKS, diagnose

pytestmark = pytest.mark.anyio

GROUP = "Ascend910-0, Ascend910-1, Ascend910-2, Ascend910-3"
# The checks up to the chips' family, then hot reset: the Kubernetes checks are not this test's.
UP_TO_HOT_RESET = tuple(c for c in CHECKS if c.name not in {"kubelet", "node-identity", "rbac"})


async def hot_reset(root: DoctorRoot, tmp_path: Path, **settings: Any) -> Finding:
    levels = levels_file(tmp_path)
    values = {"fault_levels_file": levels, **settings}
    findings = await diagnose(root.settings(**values), root.path, {}, UP_TO_HOT_RESET)
    (found,) = [finding for finding in findings if finding.name == HOT_RESET]
    return found


@pytest.fixture
def busy_node(doctor_root: DoctorRoot) -> DoctorRoot:
    doctor_root.write_scenario(node_scenario({0: RESTART_NPU, 3: SEPARATE_NPU}, processes={2: [4242]}))
    return doctor_root


async def test_off_says_so_and_which_chips_stay_out(busy_node: DoctorRoot, tmp_path: Path) -> None:
    found = await hot_reset(busy_node, tmp_path)
    assert found.status is Status.OK
    assert found.detail == (
        "hot reset is off: a chip at RestartRequest, RestartBusiness, FreeRestartNPU or RestartNPU stays out "
        "until it is reset by hand (hot_reset=true (--hot-reset, ASCEND_DP_HOT_RESET=true, Helm "
        "settings.hotReset: true) turns it on); at a reset level now: Ascend910-0 (RestartNPU)"
    )


async def test_on_it_says_what_it_would_do_now(busy_node: DoctorRoot, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("", encoding="utf-8")
    found = await hot_reset(busy_node, tmp_path, hot_reset=True, volcano=True, kubeconfig=kubeconfig)
    assert found.status is Status.OK
    assert found.detail == (
        f"hot reset is on (idle 60 s): Ascend910-0 waits for its reset group ({GROUP}): Ascend910-2 1 "
        "process(es) run on it (PID 4242); named in the node's ResetInfo annotation, never reset: "
        "Ascend910-3 (SeparateNPU)"
    )
    busy_node.write_scenario(node_scenario({0: RESTART_NPU}))
    found = await hot_reset(busy_node, tmp_path, hot_reset=True, volcano=True, kubeconfig=kubeconfig)
    assert found.detail == (
        f"hot reset is on (idle 60 s): Ascend910-0 would be reset with its reset group ({GROUP}) once no "
        "pod holds them for the idle time"
    )


async def test_on_outside_volcano_mode_pods_are_known_from_pod_resources(
    busy_node: DoctorRoot, tmp_path: Path
) -> None:
    """The plugin learns which chips pods hold from the kubelet's PodResources in every mode."""
    busy_node.write_scenario(node_scenario({0: RESTART_NPU}))
    found = await hot_reset(busy_node, tmp_path, hot_reset=True)
    assert found.status is Status.OK
    assert found.detail == (
        f"hot reset is on (idle 60 s): Ascend910-0 would be reset with its reset group ({GROUP}) once no "
        "pod holds them for the idle time"
    )


@pytest.mark.parametrize(
    ("replace", "why"),
    [
        (None, "does not exist"),
        ("file", "is not a socket"),
        ("symlink", "is a symlink, which the plugin refuses"),
    ],
)
async def test_on_without_the_pod_resources_socket_every_group_is_busy(
    busy_node: DoctorRoot, tmp_path: Path, replace: str | None, why: str
) -> None:
    socket_path = busy_node.host(DoctorRoot.POD_RESOURCES)
    socket_path.unlink()
    if replace == "file":
        socket_path.write_text("", encoding="utf-8")
    elif replace == "symlink":
        busy_node.add_socket("/run/kubelet-pod-resources.sock")
        socket_path.symlink_to(busy_node.host("/run/kubelet-pod-resources.sock"))
    found = await hot_reset(busy_node, tmp_path, hot_reset=True)
    assert found.status is Status.WARNING
    assert found.detail.endswith(
        f"The kubelet's PodResources socket {socket_path} {why}: until the kubelet's PodResources answers, "
        "every reset group counts as busy"
    )
    assert found.fix is not None
    assert "pod_resources_socket=<socket> (--pod-resources-socket <socket>" in found.fix
    assert "Volcano" not in found.detail + found.fix


async def test_a_driver_that_cannot_reset_is_a_problem(doctor_py_root: DoctorRoot, tmp_path: Path) -> None:
    # (The C fake drops a function by being built without it: the library file doctor finds is fixed.)
    doctor_py_root.write_scenario(node_scenario({0: RESTART_NPU}, missing=["reset"]))
    found = await hot_reset(doctor_py_root, tmp_path, hot_reset=True)
    assert found.status is Status.PROBLEM
    assert found.detail == (
        "hot reset is on, but the driver has no dcmi_set_device_reset: no hot reset: a faulted chip stays "
        "out until it is reset by hand"
    )
