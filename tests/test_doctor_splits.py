"""doctor, how the chips are split: static vNPUs and share_count, decided by the plugin's own rules."""

from __future__ import annotations

import json

import pytest
from conftest import DoctorRoot
from split_nodes import DUO_SPLIT, box_910b3, duo

from ascend_plugin.doctor.findings import Status
from ascend_plugin.doctor.report import passed, render_text

pytestmark = pytest.mark.anyio


async def test_a_310b_board_has_no_vnpus_and_shares_nothing_by_default(doctor_root: DoctorRoot) -> None:
    found = await doctor_root.run()
    assert (found["vnpus"].status, found["vnpus"].detail) == (
        Status.SKIPPED,
        "chips of the 310B family have no vNPUs",
    )
    assert (found["share-count"].status, found["share-count"].detail) == (
        Status.OK,
        "share_count=1: chips are not shared",
    )


async def test_sharing_a_310b_passes_and_says_how_to_turn_device_share_on(doctor_root: DoctorRoot) -> None:
    share = (await doctor_root.run(share_count=4))["share-count"]
    assert share.status is Status.OK
    assert share.detail.startswith("share_count=4: each chip is offered 4 times")
    assert share.detail.endswith("npu-smi set -t device-share -i 0 -c 0 -d 1")


async def test_share_count_on_a_910_node_is_a_warning_that_passes(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(box_910b3({}))
    found = await doctor_root.run(share_count=4)
    share = found["share-count"]
    assert share.status is Status.WARNING
    assert share.detail.startswith(
        "share_count=4 (--share-count 4, ASCEND_DP_SHARE_COUNT=4, Helm settings.shareCount: 4) is ignored "
        "on this node: its chips Ascend910-0, Ascend910-1 (910B3) are of family 910"
    )
    assert share.fix == (
        "nothing breaks; to silence it, set share_count=1 (--share-count 1, ASCEND_DP_SHARE_COUNT=1, "
        "Helm settings.shareCount: 1) for this node"
    )
    assert passed([share])
    report = render_text(list(found.values()), doctor_root.path).splitlines()
    assert any(line.startswith("WARNING  share-count") for line in report)
    assert "warning(s)" in report[-1]


async def test_a_split_duo_lists_its_vnpus_and_their_resources(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(duo())
    vnpus = (await doctor_root.run())["vnpus"]
    assert (vnpus.status, vnpus.detail) == (
        Status.OK,
        "offered as resources of their own: Ascend310P-0: 100 vir02 -> huawei.com/Ascend310P-2c, "
        "101 vir02 -> huawei.com/Ascend310P-2c, 102 vir04 -> huawei.com/Ascend310P-4c; these chips are "
        "not offered whole",
    )


async def test_sharing_a_split_chip_is_the_problem_the_plugin_refuses(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(duo())
    share = (await doctor_root.run(share_count=2))["share-count"]
    assert share.status is Status.PROBLEM
    assert share.detail.startswith(
        "share_count=2 (--share-count, ASCEND_DP_SHARE_COUNT, Helm settings.shareCount)"
    )
    assert "vnpu=static: vNPUs 100 (vir02), 101 (vir02), 102 (vir04) on Ascend310P-0 (310P3)" in share.detail
    assert share.detail.endswith("The plugin exits with code 2")


async def test_vnpu_off_on_a_split_node_is_a_problem(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(duo())
    vnpus = (await doctor_root.run(vnpu="off"))["vnpus"]
    assert vnpus.status is Status.PROBLEM
    assert vnpus.detail.startswith("vnpu=off, but chips carry vNPUs (Ascend310P-0: 100 vir02")
    assert vnpus.fix == (
        "set vnpu=static (--vnpu static, ASCEND_DP_VNPU=static, Helm settings.vnpu: static), or destroy "
        "the vNPUs (npu-smi set -t destroy-vnpu)"
    )


async def test_a_template_without_a_resource_name_is_a_warning(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(
        duo({0: [DUO_SPLIT[0], {"vdev_id": 104, "template": "vir03_x", "memory_mb": 4096}]})
    )
    vnpus = (await doctor_root.run())["vnpus"]
    assert vnpus.status is Status.WARNING
    assert vnpus.detail.startswith("vNPUs of template(s) vir03_x have no resource name and are not offered")
    assert "104 vir03_x -> ?" in vnpus.detail


def _checkpoint_owning(doctor_root: DoctorRoot, *owned: tuple[int, int]) -> None:
    """The DRA driver's checkpoint (its default place under the root) with a prepared claim per vNPU."""
    claims = {
        f"uid-{vdev}": {
            "namespace": "default",
            "name": f"c{vdev}",
            "pool": "node",
            "state": "prepared",
            "devices": [
                {
                    "device": f"npu-{phy}-x-0",
                    "requests": ["vnpu"],
                    "cdiDeviceIDs": [],
                    "vnpu": {"chip": phy, "template": "vir02", "id": vdev},
                }
            ],
        }
        for phy, vdev in owned
    }
    path = doctor_root.host("/var/lib/kubelet/plugins/npu.huawei.com/checkpoint.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 2, "claims": claims}))


async def test_vnpu_dynamic_names_the_vnpus_the_driver_destroys_at_start(doctor_root: DoctorRoot) -> None:
    doctor_root.write_scenario(duo())
    _checkpoint_owning(doctor_root, (0, 100), (0, 102))
    vnpus = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic"))["vnpus"]
    assert vnpus.status is Status.WARNING
    assert vnpus.detail.startswith("vnpu=dynamic: vNPUs that no prepared claim of the DRA driver owns")
    assert "101 vir02" in vnpus.detail
    assert "100 vir02" not in vnpus.detail, "owned by a prepared claim"
    assert vnpus.fix is not None
    assert "vnpu=static" in vnpus.fix
    _checkpoint_owning(doctor_root, (0, 100), (0, 101), (0, 102))
    owned = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic"))["vnpus"]
    assert owned.status is Status.OK


async def test_vnpu_dynamic_without_a_checkpoint_file_names_every_vnpu(doctor_root: DoctorRoot) -> None:
    """The driver's directory holds no checkpoint: a driver that never ran owns nothing."""
    doctor_root.write_scenario(duo())
    doctor_root.add_directories("/var/lib/kubelet/plugins/npu.huawei.com")
    vnpus = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic"))["vnpus"]
    assert vnpus.status is Status.WARNING
    assert vnpus.detail.startswith("vnpu=dynamic: vNPUs that no prepared claim of the DRA driver owns")
    assert all(f"{vdev} vir0" in vnpus.detail for vdev in (100, 101, 102))
    assert "the driver destroys them when it starts" in vnpus.detail


@pytest.mark.parametrize("directory", ["absent", "a file"])
async def test_vnpu_dynamic_where_the_checkpoint_cannot_be_read_says_owners_are_unknown(
    doctor_root: DoctorRoot, directory: str
) -> None:
    """The driver's directory not mounted where doctor runs: no claim to destroy them is known either."""
    doctor_root.write_scenario(duo())
    plugin_dir = "/var/lib/kubelet/plugins/npu.huawei.com"
    if directory == "a file":
        doctor_root.add_files(plugin_dir)
    vnpus = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic"))["vnpus"]
    path = doctor_root.host(f"{plugin_dir}/checkpoint.json")
    assert vnpus.status is Status.WARNING
    assert vnpus.detail.startswith(
        f"vnpu=dynamic: checkpoint {path} not readable (its directory {path.parent} is not there: not "
        "mounted here?): which vNPUs claims own is unknown (Ascend310P-0: 100 vir02"
    )
    assert "destroy" not in vnpus.detail
    assert vnpus.fix is not None
    assert "dra_plugin_path=<directory> (--dra-plugin-path <directory>" in vnpus.fix


async def test_vnpu_dynamic_with_a_checkpoint_the_driver_moves_aside_names_every_vnpu(
    doctor_root: DoctorRoot,
) -> None:
    """A checkpoint that cannot be decoded is moved aside at start: the driver then owns nothing."""
    doctor_root.write_scenario(duo())
    doctor_root.add_files("/var/lib/kubelet/plugins/npu.huawei.com/checkpoint.json", content=b"{not json")
    vnpus = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic"))["vnpus"]
    assert vnpus.status is Status.WARNING
    assert "the driver destroys them when it starts" in vnpus.detail


async def test_sharing_a_310p_split_on_demand_is_the_problem_the_plugin_refuses(
    doctor_root: DoctorRoot,
) -> None:
    doctor_root.write_scenario(duo({}))
    share = (await doctor_root.run(serve="dra", node_name="node", vnpu="dynamic", share_count=2))[
        "share-count"
    ]
    assert share.status is Status.PROBLEM
    assert "and vnpu=dynamic would both apply to chips" in share.detail
