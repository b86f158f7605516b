"""doctor and the offers on a 950 node: no HDK vNPUs (vnpu says so), its device nodes by logical id.

Huawei's DCMI v2 makes no vNPUs on the 950 (Atlas 350, 850, 950 SuperPoD): the
doctor's vNPU check and ``vnpu=dynamic`` say so in those words. The device
nodes a container gets are ``/dev/davinci<logical id>`` and everything under
``/dev/uburma`` and ``/dev/ummu``; the doctor checks those.
"""

from __future__ import annotations

import pytest
from conftest import DoctorRoot
from node_950 import CHIPS, node_950

from ascend_plugin.doctor.findings import Status

pytestmark = pytest.mark.anyio

NO_VNPUS = "the Ascend 950 has no HDK vNPUs"


async def test_doctor_on_a_950_node(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(node_950())
    doctor_root.add_files(
        *(f"/dev/davinci{logic}" for logic in range(CHIPS)),
        "/dev/davinci_manager",
        "/dev/uburma/uburma0",
        "/dev/uburma/uburma1",
        "/dev/ummu/ummu",
    )
    found = await doctor_root.run()
    assert found["vnpus"].status is Status.SKIPPED
    assert found["vnpus"].detail.startswith(NO_VNPUS)
    nodes = found["device-nodes"]
    assert nodes.status is Status.OK, nodes.detail
    assert "2 nodes under /dev/uburma; 1 nodes under /dev/ummu" in nodes.detail
    doctor_root.remove("/dev/davinci7")  # logical id 7: physical id 3's node
    missing = (await doctor_root.run())["device-nodes"]
    assert missing.status is Status.PROBLEM
    assert "/dev/davinci7" in missing.detail


async def test_vnpu_dynamic_on_a_950_node_says_there_are_no_hdk_vnpus(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(node_950())
    found = await doctor_root.run(vnpu="dynamic", serve="dra")
    said = [finding for finding in found.values() if NO_VNPUS in finding.detail]
    assert said, {name: finding.detail for name, finding in found.items()}
    assert all(finding.status is not Status.PROBLEM for finding in said)
