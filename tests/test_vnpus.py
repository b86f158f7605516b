"""Static vNPUs: a resource per template, IDs, Allocate in every handover mode, health, live changes.

Through the real binding on the C fake libdcmi.so: an Atlas 300I Duo whose
first chip is split vir02 + vir02 + vir04, and a 910B3 box whose first chip is
split into two vir10_3c_32g. The other chip of each stays whole.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import grpc
import pytest
from fake_dcmi.players import CFakePlayer
from log_records import fields, records
from plugin_harness import player_settings, registered, running_plugin
from split_nodes import (
    DUO_SPLIT,
    FAULT,
    allocate,
    box_910b3,
    duo,
    make_host,
    node_paths,
    whole_chip_nodes,
    with_chip,
)
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.families import ASCEND_310P, ASCEND_910, FamilyTable

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class SplitNode:
    """A node with one chip split and one whole, and what the kubelet should be offered."""

    scenario: FakeScenario
    table: FamilyTable
    offered: dict[str, set[str]]  # resource -> device IDs
    vnpu: str  # one vNPU's ID
    vnpu_resource: str


NODES = {
    "300i-duo": SplitNode(
        duo(),
        ASCEND_310P,
        {
            "huawei.com/Ascend310P": {"Ascend310P-1"},
            "huawei.com/Ascend310P-2c": {"Ascend310P-2c-100-0", "Ascend310P-2c-101-0"},
            "huawei.com/Ascend310P-4c": {"Ascend310P-4c-102-0"},
        },
        "Ascend310P-2c-101-0",
        "huawei.com/Ascend310P-2c",
    ),
    "910b3": SplitNode(
        box_910b3(),
        ASCEND_910,
        {
            "huawei.com/Ascend910": {"Ascend910-1"},
            "huawei.com/Ascend910-10c.3cpu.32g": {
                "Ascend910-10c.3cpu.32g-100-0",
                "Ascend910-10c.3cpu.32g-101-0",
            },
        },
        "Ascend910-10c.3cpu.32g-101-0",
        "huawei.com/Ascend910-10c.3cpu.32g",
    ),
}


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(
        short_tmp / "host", "/dev/davinci0", "/dev/davinci1", "/dev/vdavinci100", "/dev/vdavinci101"
    )


def offered(kubelet: KubeletStandIn) -> dict[str, set[str]]:
    """Every resource the kubelet would put in the node's capacity, with its device IDs."""
    return {resource: set(kubelet.health(resource)) for resource in kubelet.node_capacity()}


def all_registered(resources: object, times: int = 1) -> Any:
    return lambda k: all(registered(resource, times)(k) for resource in resources)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NODES)
async def test_every_template_is_a_resource_with_its_own_socket(
    name: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    node = NODES[name]
    c_fake.update(node.scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, all_registered(node.offered), "every resource registered")
        assert offered(kubelet) == node.offered
        for resource in node.offered:
            socket = resource.split("/")[1] + ".sock"
            assert kubelet.resources[resource].endpoint == socket
            assert (plugin_dir / socket).is_socket()
            assert set(kubelet.health(resource).values()) == {"Healthy"}


@pytest.mark.parametrize("name", NODES)
async def test_device_mode_hands_the_vnpu_node_as_a_davinci_node(
    name: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    node = NODES[name]
    c_fake.update(node.scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered(node.vnpu_resource), "registration")
        container = await allocate(kubelet, node.vnpu_resource, [node.vnpu])
    # The vNPU's own node, then the very shared nodes a whole chip gets (its chip node aside).
    shared = whole_chip_nodes(c_fake, node.table, host, 0)[1:]
    assert node_paths(container)[0] == ("/dev/vdavinci101", "/dev/davinci101")
    assert [host_path for host_path, _ in node_paths(container)[1:]] == shared
    assert [mount.host_path for mount in container.mounts] == ["/usr/local/Ascend/driver"]
    assert "/dev/davinci0" not in [host_path for host_path, _ in node_paths(container)]


@pytest.mark.parametrize("name", NODES)
async def test_runtime_mode_names_the_vnpu_and_marks_it_virtual(
    name: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    node = NODES[name]
    c_fake.update(node.scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host, allocate_mode="runtime")):
        await wait_for(kubelet, all_registered(node.offered), "registration")
        container = await allocate(kubelet, node.vnpu_resource, [node.vnpu])
        whole = await allocate(kubelet, node.table.resource_name, [node.table.chip_id(1)])
    assert dict(container.envs) == {"ASCEND_VISIBLE_DEVICES": "101", "ASCEND_RUNTIME_OPTIONS": "VIRTUAL"}
    assert (container.devices, container.mounts) == ([], [])
    assert dict(whole.envs) == {"ASCEND_VISIBLE_DEVICES": "1", "ASCEND_RUNTIME_OPTIONS": ""}


@pytest.mark.parametrize("name", NODES)
async def test_cdi_mode_names_a_device_whose_host_path_is_the_vnpu_node(
    name: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path, short_tmp: Path
) -> None:
    node = NODES[name]
    c_fake.update(node.scenario)
    spec_dir = short_tmp / "cdi"
    settings = player_settings(c_fake, plugin_dir, host, allocate_mode="cdi", cdi_spec_dir=spec_dir)
    async with running_plugin(settings):
        await wait_for(kubelet, registered(node.vnpu_resource), "registration")
        container = await allocate(kubelet, node.vnpu_resource, [node.vnpu])
    assert [device.name for device in container.cdi_devices] == ["huawei.com/npu=vnpu-101"]
    assert dict(container.annotations) == {
        f"cdi.k8s.io/ascend-device-plugin_{node.vnpu}": "huawei.com/npu=vnpu-101"
    }
    assert (container.devices, dict(container.envs)) == ([], {})
    spec = json.loads((spec_dir / "huawei.com-npu.json").read_text(encoding="utf-8"))
    assert spec["cdiVersion"] == "0.5.0"
    devices = {device["name"]: device["containerEdits"]["deviceNodes"] for device in spec["devices"]}
    assert set(devices) == {"1", "vnpu-100", "vnpu-101", *({"vnpu-102"} if name == "300i-duo" else set())}
    assert devices["vnpu-101"] == [
        {"path": "/dev/davinci101", "hostPath": "/dev/vdavinci101", "permissions": "rw"}
    ]
    shared = [node["hostPath"] for node in spec["containerEdits"]["deviceNodes"]]
    assert shared == whole_chip_nodes(c_fake, node.table, host, 1)[1:]


async def test_more_than_one_vnpu_in_a_container_is_refused_naming_them(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo())
    resource = "huawei.com/Ascend310P-2c"
    async with running_plugin(player_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered(resource), "registration")
        with pytest.raises(grpc.RpcError) as refused:
            await allocate(kubelet, resource, ["Ascend310P-2c-100-0", "Ascend310P-2c-101-0"])
        assert app.face is not None
        assert app.face.stats.allocation_errors["vnpus"] == 1
    error: Any = refused.value
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "the request names 2 vNPUs (Ascend310P-2c-100-0, Ascend310P-2c-101-0); a container can hold one "
        "vNPU only (the Ascend runtime mounts one virtual device per container): request 1 of "
        "huawei.com/Ascend310P-2c"
    )


@pytest.mark.parametrize("name", NODES)
async def test_a_fault_turns_its_chips_vnpus_unhealthy_and_nothing_else(
    name: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    node = NODES[name]
    split = {resource: ids for resource, ids in node.offered.items() if resource != node.table.resource_name}

    def health(kubelet: KubeletStandIn, resources: dict[str, set[str]]) -> set[str]:
        return {health for resource in resources for health in kubelet.health(resource).values()}

    c_fake.update(node.scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, all_registered(node.offered), "registration")
        c_fake.update(with_chip(node.scenario, 0, fault_codes=[FAULT]))
        await wait_for(kubelet, lambda k: health(k, split) == {"Unhealthy"}, "the split chip's vNPUs out")
        assert kubelet.health(node.table.resource_name) == {node.table.chip_id(1): "Healthy"}
        c_fake.update(node.scenario)
        await wait_for(kubelet, lambda k: health(k, split) == {"Healthy"}, "its vNPUs healthy again")
        # A fault on the whole chip leaves the vNPUs of the other alone.
        c_fake.update(with_chip(node.scenario, 1, fault_codes=[FAULT]))
        await wait_for(
            kubelet,
            lambda k: k.health(node.table.resource_name) == {node.table.chip_id(1): "Unhealthy"},
            "the whole chip unhealthy",
        )
        assert health(kubelet, split) == {"Healthy"}


async def test_vnpus_that_go_and_come_move_their_resources_within_a_poll(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo())
    four_cores = "huawei.com/Ascend310P-4c"
    async with running_plugin(player_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, all_registered(NODES["300i-duo"].offered), "registration")

        # vir04 destroyed: its resource is left without devices, so its server stops and its socket goes.
        c_fake.update(duo({0: DUO_SPLIT[:2]}))
        await wait_for(kubelet, lambda k: four_cores not in k.node_capacity(), "the 4c resource dropped")
        assert kubelet.resources[four_cores].stream_end == "OK"
        await until(lambda: not (plugin_dir / "Ascend310P-4c.sock").exists(), "its socket removed")
        assert app.face is not None
        assert four_cores not in app.face.servers
        assert offered(kubelet) == {
            "huawei.com/Ascend310P": {"Ascend310P-1"},
            "huawei.com/Ascend310P-2c": {"Ascend310P-2c-100-0", "Ascend310P-2c-101-0"},
        }

        # One of the two vir02 goes: its resource stays, without the ID.
        c_fake.update(duo({0: DUO_SPLIT[:1]}))
        await wait_for(
            kubelet,
            lambda k: set(k.health("huawei.com/Ascend310P-2c")) == {"Ascend310P-2c-100-0"},
            "101 gone",
        )

        # A vir04 made on the whole chip: the chip leaves the whole-chip resource, 4c comes back.
        c_fake.update(duo({0: DUO_SPLIT[:1], 1: [{"vdev_id": 103, "template": "vir04", "memory_mb": 12288}]}))
        await wait_for(kubelet, registered(four_cores, times=2), "the 4c resource back")
        await wait_for(kubelet, lambda k: "huawei.com/Ascend310P" not in k.node_capacity(), "no whole chip")
        assert offered(kubelet) == {
            "huawei.com/Ascend310P-2c": {"Ascend310P-2c-100-0"},
            "huawei.com/Ascend310P-4c": {"Ascend310P-4c-103-1"},
        }
        container = await allocate(kubelet, four_cores, ["Ascend310P-4c-103-1"])
        assert node_paths(container)[0] == ("/dev/vdavinci103", "/dev/davinci103")

        # Every vNPU of the first chip destroyed: it is offered whole again.
        c_fake.update(duo({1: [{"vdev_id": 103, "template": "vir04", "memory_mb": 12288}]}))
        await wait_for(kubelet, registered("huawei.com/Ascend310P", times=2), "the whole chip back")
        await wait_for(kubelet, lambda k: "huawei.com/Ascend310P-2c" not in k.node_capacity(), "2c dropped")
        assert offered(kubelet) == {
            "huawei.com/Ascend310P": {"Ascend310P-0"},
            "huawei.com/Ascend310P-4c": {"Ascend310P-4c-103-1"},
        }
        sockets = sorted([path.name async for path in anyio.Path(plugin_dir).glob("*.sock")])
        assert sockets == ["Ascend310P-4c.sock", "Ascend310P.sock", "kubelet.sock"]


async def test_a_vnpu_made_again_under_its_id_with_another_template_moves_resource(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo({0: [{"vdev_id": 100, "template": "vir02", "memory_mb": 6144}]}))
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered("huawei.com/Ascend310P-2c"), "registration")
        c_fake.update(duo({0: [{"vdev_id": 100, "template": "vir04", "memory_mb": 12288}]}))
        await wait_for(kubelet, registered("huawei.com/Ascend310P-4c"), "the same id as a 4c vNPU")
        await wait_for(kubelet, lambda k: "huawei.com/Ascend310P-2c" not in k.node_capacity(), "2c dropped")
        assert kubelet.health("huawei.com/Ascend310P-4c") == {"Ascend310P-4c-100-0": "Healthy"}


async def test_a_kubelet_restart_re_registers_every_resource(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    node = NODES["300i-duo"]
    c_fake.update(node.scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, all_registered(node.offered), "registration")
        for times in (2, 3):
            restart = await anyio.to_thread.run_sync(kubelet.restart)
            assert set(restart.deleted_sockets) == {
                "Ascend310P.sock",
                "Ascend310P-2c.sock",
                "Ascend310P-4c.sock",
            }
            await wait_for(kubelet, all_registered(node.offered, times), f"re-registration {times}")
            assert offered(kubelet) == node.offered


async def test_a_template_outside_the_table_is_skipped_with_a_warning_and_its_chip_is_not_whole(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = {"vdev_id": 104, "template": "vir03_x", "memory_mb": 4096}
    c_fake.update(duo({0: [DUO_SPLIT[0], odd]}))
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered("huawei.com/Ascend310P-2c"), "registration")
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "registration")
        assert offered(kubelet) == {
            "huawei.com/Ascend310P": {"Ascend310P-1"},
            "huawei.com/Ascend310P-2c": {"Ascend310P-2c-100-0"},
        }
    skipped = records(caplog, "ascend_plugin.offers.node_offers", level=logging.WARNING, template="vir03_x")
    assert [fields(record, "vnpu", "chip") for record in skipped] == [{"vnpu": 104, "chip": 0}], "said once"


async def test_vnpu_off_reads_none_and_offers_every_chip_whole(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo())
    async with running_plugin(player_settings(c_fake, plugin_dir, host, vnpu="off")):
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "registration")
        assert offered(kubelet) == {"huawei.com/Ascend310P": {"Ascend310P-0", "Ascend310P-1"}}


async def test_a_chip_whose_vnpus_cannot_be_read_is_never_offered_healthy(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    c_fake.update(with_chip(duo(), 0, errors={"vdev_info": -8005}))
    async with running_plugin(player_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "registration")
        # It may be split, so it is not handed out whole: listed, but unhealthy until its vNPUs are known.
        assert kubelet.health("huawei.com/Ascend310P") == {
            "Ascend310P-0": "Unhealthy",
            "Ascend310P-1": "Healthy",
        }
        assert app.face is not None
        device = app.face.book.get("huawei.com/Ascend310P", "Ascend310P-0")
        assert device is not None
        assert device.reason.startswith("its vNPUs could not be read yet")
        c_fake.update(duo())
        await wait_for(kubelet, all_registered(NODES["300i-duo"].offered), "the vNPUs once readable")
        await wait_for(
            kubelet, lambda k: k.health("huawei.com/Ascend310P") == {"Ascend310P-1": "Healthy"}, "split"
        )
    warnings = records(caplog, "ascend_plugin.inventory.monitor", level=logging.WARNING, call="vnpus")
    assert [record.__dict__["chip"] for record in warnings] == [0], "said once, while the reads fail alike"
    assert warnings[0].__dict__["error"].startswith("dcmi_get_device_info returned -8005")
