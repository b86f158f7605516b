"""doctor, the host's files: the 310B board's six files and dmp_daemon's /dev/shm."""

from __future__ import annotations

import pytest
import yaml
from chart_harness import CHART_DIR
from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Guide, Status
from backends.fake import FakeScenario
from backends.families import ASCEND_310B

pytestmark = pytest.mark.anyio


def test_the_files_checked_are_the_files_the_310b_chart_mounts() -> None:
    values = yaml.safe_load((CHART_DIR / "values-310b.yaml").read_text(encoding="utf-8"))
    assert [item.path for item in ASCEND_310B.host_files] == values["hostFiles"]


async def test_a_healthy_board_has_every_file_and_the_hosts_shared_memory(doctor_py_root: DoctorRoot) -> None:
    found = await doctor_py_root.run()
    for path in DoctorRoot.HOST_FILES:
        assert found[f"host-file:{path}"].status is Status.OK
    assert found["dev-shm"].status is Status.OK


@pytest.mark.parametrize(
    "path", ["/var/slogd", "/var/dmp_daemon", "/var/queue_schedule", "/etc/hdcBasic.cfg"]
)
async def test_a_file_seen_as_a_directory_names_the_mount_type(doctor_py_root: DoctorRoot, path: str) -> None:
    doctor_py_root.remove(path)
    doctor_py_root.add_directories(path)
    finding = (await doctor_py_root.run())[f"host-file:{path}"]
    assert finding.status is Status.PROBLEM
    assert finding.see is Guide.BOARD_FILES
    assert f"{doctor_py_root.host(path)} is a directory, not the file the driver needs" in finding.detail
    assert finding.fix is not None
    assert "hostPath of type File, read-only (Helm hostFiles" in finding.fix


@pytest.mark.parametrize("path", DoctorRoot.HOST_FILES)
async def test_a_missing_host_file_is_named_with_what_needs_it(doctor_py_root: DoctorRoot, path: str) -> None:
    doctor_py_root.remove(path)
    found = await doctor_py_root.run()
    finding = found[f"host-file:{path}"]
    assert (finding.status, finding.see) == (Status.PROBLEM, Guide.BOARD_FILES)
    assert finding.detail.startswith(f"{doctor_py_root.host(path)} does not exist (")
    others = [other for other in DoctorRoot.HOST_FILES if other != path]
    assert all(found[f"host-file:{other}"].status is Status.OK for other in others)


async def test_without_hdc_config_the_detail_says_hdc_fails(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove("/etc/hdcBasic.cfg")
    finding = (await doctor_py_root.run())["host-file:/etc/hdcBasic.cfg"]
    assert "HDC, and so DCMI, fails to initialise" in finding.detail


@pytest.mark.parametrize("missing", [("/dev/shm/dmp", "/dev/shm/iam"), ("/dev/shm/iam",)])
async def test_a_private_dev_shm_names_dm_send_msg_and_the_host_path(
    doctor_py_root: DoctorRoot, missing: tuple[str, ...]
) -> None:
    for path in missing:
        doctor_py_root.remove(path)
    shm = (await doctor_py_root.run())["dev-shm"]
    assert (shm.status, shm.see) == (Status.PROBLEM, Guide.SHARED_MEMORY)
    assert shm.detail.startswith(", ".join(str(doctor_py_root.host(path)) for path in missing) + " not found")
    assert "dm_send_msg fail:2" in shm.detail
    assert shm.fix is not None
    assert "hostPath, never an emptyDir" in shm.fix


async def test_other_families_need_neither(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.write_scenario(
        FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]})
    )
    doctor_py_root.remove("/var/slogd")
    doctor_py_root.remove("/dev/shm/dmp")
    found = await doctor_py_root.run()
    assert (found["host-files"].status, found["host-files"].detail) == (
        Status.SKIPPED,
        "the 910 family needs no host files",
    )
    assert found["dev-shm"].status is Status.SKIPPED
    assert "host-file:/var/slogd" not in found


async def test_an_unknown_family_skips_them_and_says_how_to_check_anyway(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.write_scenario(
        FakeScenario.model_validate(
            {"chip_name": "310B1", "chips": [{"phy_id": 0}], "errors": {"init": -8005}}
        )
    )
    found = await doctor_py_root.run()
    assert found["host-files"].status is Status.SKIPPED
    assert "--chip-family 310B" in found["host-files"].detail

    doctor_py_root.remove("/var/slogd")
    forced = await doctor_py_root.run(chip_family="310B")
    assert forced["host-file:/var/slogd"].status is Status.PROBLEM
