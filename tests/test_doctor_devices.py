"""doctor, the device nodes: /dev/davinci<phy> per chip and a manager node exist; shared ones are listed."""

from __future__ import annotations

import pytest
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Status
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio


async def test_a_healthy_board_has_its_nodes(doctor_py_root: DoctorRoot) -> None:
    nodes = (await doctor_py_root.run())["device-nodes"]
    assert nodes.status is Status.OK
    assert nodes.detail.startswith("/dev/davinci0, manager /dev/davinci_manager_docker; 2 of 17 shared nodes")
    assert "absent, so not handed over: /dev/dvpp_cmdlist, /dev/pngd," in nodes.detail
    assert nodes.detail.endswith(" and 7 more)")


async def test_a_missing_chip_node_is_a_problem(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove("/dev/davinci0")
    nodes = (await doctor_py_root.run())["device-nodes"]
    assert nodes.status is Status.PROBLEM
    assert nodes.detail.startswith(f"missing under {doctor_py_root.path}: /dev/davinci0;")
    assert nodes.fix is not None
    assert "mount the host's /dev" in nodes.fix


async def test_without_a_manager_node_the_setting_is_named(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove("/dev/davinci_manager_docker")
    nodes = (await doctor_py_root.run())["device-nodes"]
    assert nodes.status is Status.PROBLEM
    assert (
        "none of the manager nodes /dev/davinci_manager_docker, /dev/davinci_manager exists" in nodes.detail
    )
    assert nodes.fix is not None
    assert "manager_nodes=<node> (--manager-nodes <node>" in nodes.fix

    doctor_py_root.add_files("/dev/npu_manager")
    overridden = (await doctor_py_root.run(manager_nodes="/dev/npu_manager"))["device-nodes"]
    assert overridden.status is Status.OK
    assert "manager /dev/npu_manager" in overridden.detail


async def test_every_chip_is_looked_for(doctor_py_root: DoctorRoot) -> None:
    chips = [{"phy_id": phy, "card_id": phy // 4, "device_id": phy % 4} for phy in range(12)]
    doctor_py_root.write_scenario(FakeScenario.model_validate({"chip_name": "910B3", "chips": chips}))
    doctor_py_root.add_files("/dev/davinci_manager", *(f"/dev/davinci{phy}" for phy in range(11)))
    nodes = (await doctor_py_root.run())["device-nodes"]
    assert nodes.status is Status.PROBLEM
    assert nodes.detail.startswith(f"missing under {doctor_py_root.path}: /dev/davinci11;")

    doctor_py_root.add_files("/dev/davinci11")
    nodes = (await doctor_py_root.run())["device-nodes"]
    assert nodes.status is Status.OK
    assert nodes.detail.startswith("/dev/davinci0, /dev/davinci1, ")
    assert " and 4 more, manager /dev/davinci_manager;" in nodes.detail
