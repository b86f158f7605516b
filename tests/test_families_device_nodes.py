"""Device nodes a container gets in device mode, per family, for chips found through the binding.

The host's /dev is a directory of plain files under a fake host root.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import handover, whole_chips

from ascend_plugin.handover.modes import HandoverMode
from ascend_plugin.offers.base import DeviceNode
from backends.fake import FakeScenario
from backends.families import ASCEND_310, ASCEND_310B, ASCEND_310P, ASCEND_910, FamilyTable

# What an Atlas 200I A2 board has under /dev, trimmed (no /dev/hdmi, /dev/ai, /dev/ao, /dev/vo, /dev/acodec).
ATLAS_200I_A2 = (
    "davinci0", "davinci_manager", "davinci_manager_docker", "hisi_hdc", "devmm_svm", "pngd", "venc",
    "upgrade", "sys", "svm0", "vdec", "vpc", "ts_aisle", "log_drv",
)  # fmt: skip
SOC_NODES_PRESENT = (
    "/dev/pngd", "/dev/venc", "/dev/upgrade", "/dev/sys", "/dev/svm0", "/dev/vdec", "/dev/vpc",
    "/dev/ts_aisle", "/dev/log_drv",
)  # fmt: skip
# A two-chip server or card: no SoC media nodes, no dvpp_cmdlist; a stray /dev/vpc.
SERVER = ("davinci0", "davinci1", "davinci_manager", "hisi_hdc", "devmm_svm", "vpc")


def _host(root: Path, names: tuple[str, ...]) -> Path:
    (root / "dev").mkdir(parents=True)
    for name in names:
        (root / "dev" / name).touch()
    return root


def _nodes(
    c_fake: CFakePlayer,
    family: FamilyTable,
    chip_name: str,
    host: Path,
    phy_ids: tuple[int, ...] = (0,),
) -> list[DeviceNode]:
    """Device nodes for every chip of a one-card node with these physical ids."""
    chips = [{"phy_id": phy, "card_id": 0} for phy in phy_ids]
    library = c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": chips}))
    return list(handover(HandoverMode.DEVICE, family, host).grant(whole_chips(library, family)).devices)


def test_310b_prefers_the_docker_manager_and_adds_the_soc_nodes_present(
    c_fake: CFakePlayer, tmp_path: Path
) -> None:
    nodes = _nodes(c_fake, ASCEND_310B, "310B1", _host(tmp_path, ATLAS_200I_A2))
    assert nodes == [
        DeviceNode("/dev/davinci0", "/dev/davinci0"),
        DeviceNode("/dev/davinci_manager_docker", "/dev/davinci_manager"),
        DeviceNode("/dev/hisi_hdc", "/dev/hisi_hdc"),
        DeviceNode("/dev/devmm_svm", "/dev/devmm_svm"),
        *(DeviceNode(path, path) for path in SOC_NODES_PRESENT),
    ]


def test_310b_without_the_docker_manager_uses_the_plain_one(c_fake: CFakePlayer, tmp_path: Path) -> None:
    nodes = _nodes(c_fake, ASCEND_310B, "310B4", _host(tmp_path, ("davinci0", "davinci_manager")))
    assert nodes == [
        DeviceNode("/dev/davinci0", "/dev/davinci0"),
        DeviceNode("/dev/davinci_manager", "/dev/davinci_manager"),
    ]


@pytest.mark.parametrize(
    ("family", "chip_name"),
    [(ASCEND_310, "310"), (ASCEND_310P, "310P3"), (ASCEND_910, "910B3")],
)
def test_other_families_get_their_chips_and_the_shared_nodes_only(
    c_fake: CFakePlayer, tmp_path: Path, family: FamilyTable, chip_name: str
) -> None:
    nodes = _nodes(c_fake, family, chip_name, _host(tmp_path, SERVER), phy_ids=(1, 0))
    assert nodes == [
        DeviceNode(path, path)
        for path in (
            "/dev/davinci0",
            "/dev/davinci1",
            "/dev/davinci_manager",
            "/dev/hisi_hdc",
            "/dev/devmm_svm",
        )
    ]


def test_a_missing_manager_node_is_left_out_not_invented(c_fake: CFakePlayer, tmp_path: Path) -> None:
    nodes = _nodes(c_fake, ASCEND_910, "910B3", _host(tmp_path, ("davinci0", "davinci1")), (0, 1))
    assert nodes == [
        DeviceNode("/dev/davinci0", "/dev/davinci0"),
        DeviceNode("/dev/davinci1", "/dev/davinci1"),
    ]
