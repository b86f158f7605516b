"""doctor, the node's identity: NODE_NAME and HOST_IP from the downward API."""

from __future__ import annotations

import pytest
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Guide, Status

pytestmark = pytest.mark.anyio

IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}  # what the kubelet sets in every pod


async def test_unset_node_name_and_host_ip_name_the_downward_api(
    doctor_py_root: DoctorRoot,
) -> None:
    found = await doctor_py_root.run(IN_A_POD, node_name=None, host_ip=None)
    node_name, host_ip = found["node-name"], found["host-ip"]
    assert (node_name.status, node_name.see) == (Status.PROBLEM, Guide.NODE_IDENTITY)
    assert node_name.detail.startswith("NODE_NAME is not set")
    assert node_name.fix is not None
    assert "fieldRef spec.nodeName" in node_name.fix
    assert (host_ip.status, host_ip.see) == (Status.PROBLEM, Guide.NODE_IDENTITY)
    assert "'host ip is invalid'" in host_ip.detail
    assert host_ip.fix is not None
    assert "fieldRef status.hostIP" in host_ip.fix
    # Without a node name the plugin talks to no API server, so its permissions do not matter yet.
    assert found["rbac"].detail == "the Kubernetes features are off while NODE_NAME is unset (see node-name)"


@pytest.mark.parametrize("address", ["300.1.2.3", "node-1", "10.0.0.1/24"])
async def test_a_host_ip_that_is_no_address_is_a_problem(doctor_py_root: DoctorRoot, address: str) -> None:
    host_ip = (await doctor_py_root.run(IN_A_POD, host_ip=address))["host-ip"]
    assert host_ip.status is Status.PROBLEM
    assert host_ip.detail.startswith(f"HOST_IP={address!r} is not an IP address")


@pytest.mark.parametrize("address", ["192.0.2.10", "2001:db8::1"])
async def test_set_identity_passes(doctor_py_root: DoctorRoot, address: str) -> None:
    found = await doctor_py_root.run(node_name="edge-7", host_ip=address)
    assert (found["node-name"].status, found["node-name"].detail) == (Status.OK, "NODE_NAME=edge-7")
    assert (found["host-ip"].status, found["host-ip"].detail) == (Status.OK, f"HOST_IP={address}")


async def test_outside_a_pod_unset_identity_is_not_a_problem(doctor_py_root: DoctorRoot) -> None:
    """doctor run on the node itself: nothing sets NODE_NAME or HOST_IP there, and nothing must."""
    found = await doctor_py_root.run({}, node_name=None, host_ip=None)
    node_name, host_ip = found["node-name"], found["host-ip"]
    assert node_name.status is Status.SKIPPED
    assert node_name.detail == (
        "not checked: not in a pod (no KUBERNETES_SERVICE_HOST), where the chart sets NODE_NAME from the "
        "downward API; give --node-name <node> to check it here"
    )
    assert host_ip.status is Status.SKIPPED
    assert "give --host-ip <node IP> to check it here" in host_ip.detail
    assert not [finding.name for finding in found.values() if finding.status is Status.PROBLEM]


async def test_outside_a_pod_a_given_identity_is_still_checked(doctor_py_root: DoctorRoot) -> None:
    found = await doctor_py_root.run({}, node_name="edge-7", host_ip="node-1")
    assert found["node-name"].status is Status.OK
    assert found["host-ip"].status is Status.PROBLEM
