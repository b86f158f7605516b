"""Which container holds which chip, from the kubelet's PodResources, in every mode; the held chips from it.

The plugin runs on the C fake libdcmi.so with the kubelet stand-in and its
PodResources socket: whole chips, shares and vNPUs name their chips; a DRA
claim's devices name theirs; one listing serves every part that asked at once;
the held chips stay as known while the kubelet is away.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import player_settings, registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from split_nodes import atlas_300i, duo, make_host
from waiting import until, wait_for

from ascend_plugin.faces.dra.names import chip_of, partition_name
from ascend_plugin.holdings.held import ChipResolver, ClaimNames, HeldChips
from ascend_plugin.holdings.pod_resources import ContainerRef, PodResourcesClient
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

LIST = "/v1.PodResourcesLister/List"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", *(f"/dev/davinci{n}" for n in range(4)), "/dev/vdavinci100")


async def test_whole_chips_name_their_holders_and_fill_held_chips_without_volcano(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
) -> None:
    c_fake.update(atlas_300i())
    resource = "huawei.com/Ascend310"
    settings = player_settings(c_fake, plugin_dir, host, pod_resources_socket=pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(resource), "registration")
        await anyio.to_thread.run_sync(
            pod_resources.admit, "ml", "trainer", resource, ["Ascend310-1", "Ascend310-2"]
        )
        holdings = app.held
        await holdings.refresh()
        assert app.held.known
        assert app.held.chips == {1, 2}
        assert holdings.holders(1) == (ContainerRef("ml", "trainer", "main"),)
        assert holdings.holders(0) == ()
        [held] = holdings.containers()
        assert [(device.resource, device.id, device.chips) for device in held.devices] == [
            (resource, "Ascend310-1", (1,)),
            (resource, "Ascend310-2", (2,)),
        ]
        pod_resources.remove("ml", "trainer")
        await holdings.refresh()
        assert app.held.chips == frozenset()
        assert holdings.containers() == ()


async def test_shares_and_vnpus_name_their_chip(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
) -> None:
    # An Atlas 300I Duo whose first chip carries vNPU 100 (vir02); the second is shared twice.
    c_fake.update(duo({0: [{"vdev_id": 100, "template": "vir02", "memory_mb": 6144}]}))
    settings = player_settings(c_fake, plugin_dir, host, pod_resources_socket=pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310P-2c"), "the vNPU's registration")
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "the whole chip's registration")
        await anyio.to_thread.run_sync(
            pod_resources.admit, "infer", "small", "huawei.com/Ascend310P-2c", ["Ascend310P-2c-100-0"]
        )
        await anyio.to_thread.run_sync(
            pod_resources.admit, "infer", "whole", "huawei.com/Ascend310P", ["Ascend310P-1"]
        )
        holdings = app.held
        await holdings.refresh()
        assert app.held.chips == {0, 1}
        small = next(held for held in holdings.containers() if held.ref.pod == "small")
        assert [(device.chips, device.vnpu) for device in small.devices] == [((0,), 100)]
        assert holdings.holders(1) == (ContainerRef("infer", "whole", "main"),)


async def test_several_containers_on_one_shared_chip_are_all_holders(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
) -> None:
    c_fake.update(duo({}))
    resource = "huawei.com/Ascend310P"
    settings = player_settings(
        c_fake, plugin_dir, host, pod_resources_socket=pod_resources.socket, share_count=2
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(resource), "registration")
        await anyio.to_thread.run_sync(pod_resources.admit, "a", "one", resource, ["Ascend310P-0-0"])
        await anyio.to_thread.run_sync(pod_resources.admit, "b", "two", resource, ["Ascend310P-0-1"], "side")
        holdings = app.held
        await holdings.refresh()
        assert holdings.holders(0) == (ContainerRef("a", "one", "main"), ContainerRef("b", "two", "side"))
        assert app.held.chips == {0}


async def test_one_listing_serves_every_part_that_asks_while_it_is_under_way(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    pod_resources: PodResourcesStandIn,
) -> None:
    c_fake.update(atlas_300i())
    settings = player_settings(c_fake, plugin_dir, host, pod_resources_socket=pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310"), "registration")
        holdings = app.held
        await until(lambda: app.held.known, "the first listing")
        before = pod_resources.calls.count(LIST)
        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(holdings.refresh)
        # The ten share at most two listings: one possibly under way from the cadence, one after it.
        assert pod_resources.calls.count(LIST) - before <= 2


async def test_the_held_chips_stay_as_known_while_the_kubelet_is_away(
    kubelet: KubeletStandIn, pod_resources: PodResourcesStandIn
) -> None:
    names = ClaimNames("npu.huawei.com", "node-a", chip_of)
    held = holdings = HeldChips(PodResourcesClient(pod_resources.socket), ChipResolver(claims=names))
    pod_resources.claim("ml", "job", "npus", [("npu.huawei.com", "node-a", "npu-3")])
    assert await holdings.refresh() is not None
    assert held.chips == {3}
    pod_resources.stop()
    assert await holdings.refresh() is None
    assert held.chips == {3}  # not forgotten because the kubelet is restarting
    holdings.also_held(frozenset({5}))  # a part that knows without the kubelet (Volcano's annotations)
    assert held.chips == {5}


async def test_dra_claims_name_their_chips_and_strangers_are_left_out(
    kubelet: KubeletStandIn, pod_resources: PodResourcesStandIn
) -> None:
    names = ClaimNames("npu.huawei.com", "node-a", chip_of)
    held = holdings = HeldChips(PodResourcesClient(pod_resources.socket), ChipResolver(claims=names))
    pod_resources.claim(
        "ml",
        "job",
        "npus",
        [
            ("npu.huawei.com", "node-a", "npu-2"),
            ("npu.huawei.com", "node-a", "npu-6"),
            ("npu.huawei.com", "node-a", partition_name(5, "vir10_3c_32g", 1)),  # a vNPU made on demand
            ("gpu.example.com", "node-a", "npu-1"),  # another driver's device
            ("npu.huawei.com", "node-b", "npu-4"),  # another node's pool
            ("npu.huawei.com", "node-a", "switch-0"),  # not a chip of ours
            ("npu.huawei.com", "node-a", "npu-7-counters"),  # a counter set, not a device
        ],
    )
    await holdings.refresh()
    assert held.chips == {2, 5, 6}
    [container] = holdings.containers()
    assert container.ref == ContainerRef("ml", "job", "main")
    assert [(device.id, device.chips) for device in container.devices] == [
        ("npu-2", (2,)),
        ("npu-6", (6,)),
        ("npu-5-vir10-3c-32g-1", (5,)),
    ]
