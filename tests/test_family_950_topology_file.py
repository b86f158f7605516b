"""HCCL_TOPO_FILE_PATH on a 950 node: the driver's topology file of the node's product, as Huawei's plugin
names it, given to every container that holds a chip, and only when the host has the file."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from log_records import records
from node_950 import RESOURCE, host, node_950
from plugin_harness import player_settings, registered, running_plugin
from waiting import wait_for

from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from ascend_plugin.testing.simulate_950 import TOPOLOGY_FILE
from backends.families import family_named
from backends.library import SuperPodInfo

ASCEND_950 = family_named("950").TABLE
DIRECTORY = "/usr/local/Ascend/driver/topo/950"


def placed(super_pod_type: int) -> SuperPodInfo:
    return SuperPodInfo(
        sdid=0,
        scale_type=0,
        super_pod_id=1,
        server_id=2,
        chassis_id=3,
        super_pod_type=super_pod_type,
        racks=True,
    )


@pytest.mark.parametrize(
    ("super_pod_type", "name"),
    [
        (0, "atlas_850_1.json"),
        (1, "atlas_950_1.json"),
        (2, "atlas_950_2.json"),
        (3, "atlas_850_2.json"),
        (4, "atlas_850_3.json"),
        (5, "atlas_350_1.json"),
        (6, "atlas_350_3.json"),
    ],
)
def test_each_product_has_its_file(super_pod_type: int, name: str) -> None:
    assert ASCEND_950.topology_file(placed(super_pod_type)) == (f"{DIRECTORY}/{name}", "")


def test_an_unknown_product_or_place_names_no_file_and_says_why() -> None:
    path, why = ASCEND_950.topology_file(placed(9))
    assert path is None
    assert why == "super_pod_type 9 names no product with one (0, 1, 2, 3, 4, 5, 6 do)"
    path, why = ASCEND_950.topology_file(None)
    assert path is None
    assert why == "no chip could say the node's super_pod_type (its product)"


def test_other_families_have_no_file_and_nothing_to_say(tmp_path: Path) -> None:
    other = HostDevices(family_named("910").TABLE, tmp_path, placed(0))
    assert (dict(other.env), other.unnamed) == ({}, "")


def test_the_file_is_named_once_the_host_has_it(tmp_path: Path) -> None:
    devices = HostDevices(ASCEND_950, tmp_path, placed(2))
    assert dict(devices.env) == {}
    assert devices.unnamed == f"the node's topology file {DIRECTORY}/atlas_950_2.json is not on the host"
    file = tmp_path / DIRECTORY.lstrip("/") / "atlas_950_2.json"
    file.parent.mkdir(parents=True)
    file.write_text("{}\n", encoding="ascii")  # a driver installed since: its directory changed
    assert dict(devices.env) == {"HCCL_TOPO_FILE_PATH": f"{DIRECTORY}/atlas_950_2.json"}
    assert devices.unnamed == ""


@pytest.mark.anyio
async def test_without_the_file_containers_get_no_path_and_the_log_says_why(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    c_fake.update(node_950())
    root = host(short_tmp / "host")
    (root / TOPOLOGY_FILE.lstrip("/")).unlink()
    settings = player_settings(c_fake, plugin_dir, root, allocate_mode="runtime")
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["npu-0"])
    assert "HCCL_TOPO_FILE_PATH" not in response.container_responses[0].envs
    (said,) = records(caplog, "ascend_plugin.app", level=logging.WARNING, reason="TopologyFileUnnamed")
    assert said.getMessage() == (
        f"containers get no HCCL_TOPO_FILE_PATH: the node's topology file {TOPOLOGY_FILE} is not on the "
        "host; a job whose HCCL needs it sets it in the pod"
    )
