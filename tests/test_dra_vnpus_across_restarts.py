"""A vNPU is never handed to two claims nor destroyed under one, across restarts: real plugin processes.

The DRA driver runs as ``ascend-device-plugin run --serve dra`` on the fake
driver, which keeps its vNPUs in a state file as a real driver keeps them in
the device: what one process made, the next finds. Between two processes a
test does what an operator (npu-smi) or a crash does: destroys a claim's vNPU,
or cuts the checkpoint in half.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dra_harness import A2_SERVER, NODE, DraNode, prepare, put_claim, registered, result, unprepare
from fake_apiserver import FakeApiServer
from log_records import lines
from plugin_harness import FakeNode
from plugin_process import PluginProcess, plugin_process
from waiting import until

from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake.library import FakeLibrary

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PREPARE_LOG = "ascend_plugin.faces.dra.prepare"
KEEPER_LOG = "ascend_plugin.faces.dra.vnpus"
VIR10 = "vir10_3c_32g"


@pytest.fixture
def node(dra_node: DraNode, apiserver: FakeApiServer) -> DraNode:
    """The A2 server, its driver making /dev/vdavinci<N> under the host root; the Node in the API server."""
    dra_node.write({**A2_SERVER, "vdev_node_dir": str(dra_node.host_root / "dev")})
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    return dra_node


@pytest.fixture
def driver(node: DraNode, kubeconfig: Path, short_tmp: Path) -> Callable[[], Any]:
    """Start a plugin process serving ``node`` with vnpu=dynamic; each is killed at the end of its block."""
    started = 0

    @contextmanager
    def start() -> Iterator[PluginProcess]:
        nonlocal started
        started += 1
        fake = FakeNode(node.scenario, node.host_root)
        log = short_tmp / f"plugin-{started}.log"
        with plugin_process(
            fake,
            node.root / "device-plugins",
            log,
            *node.flags(kubeconfig, vnpu="dynamic", dra_partition_places=2),
        ) as plugin:
            yield plugin

    return start


def the_driver(node: DraNode) -> FakeLibrary:
    """The fake driver as another program on the node sees it (npu-smi)."""
    library = FakeLibrary(node.scenario)
    library.init()
    return library


def spec_nodes(node: DraNode, uid: str) -> list[str] | None:
    """The host paths the claim's CDI spec hands over; None when it has no spec."""
    spec = node.spec_files().get(f"huawei.com-npu-claim-{uid}.json")
    if spec is None:
        return None
    return [n["hostPath"] for device in spec["devices"] for n in device["containerEdits"]["deviceNodes"]]


def recorded(node: DraNode) -> dict[str, Any]:
    claims: dict[str, Any] = json.loads(node.checkpoint.read_text())["claims"]
    return claims


async def up(plugin: PluginProcess, kubelet: DraKubeletStandIn, times: int) -> None:
    """Wait until the process registered with the kubelet (for the ``times``-th time); fail if it died."""

    def done() -> bool:
        assert plugin.exited() is None, plugin.log.read_text()
        return registered(kubelet, times)

    await until(done, f"registration {times}")


async def test_a_claim_whose_vnpu_was_destroyed_while_the_driver_was_stopped_fails_and_loses_its_spec(
    node: DraNode, driver: Callable[[], Any], dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    first = put_claim(apiserver, "first", [result("npu-3-vir10-3c-32g-0")])
    with driver() as plugin:
        await up(plugin, dra_kubelet, 1)
        assert (await prepare(dra_kubelet, first)).claims[first[2]].error == ""
    made = recorded(node)[first[2]]["devices"][0]["vnpu"]["id"]
    assert spec_nodes(node, first[2]) == [f"/dev/vdavinci{made}"]
    the_driver(node).destroy_vdev(3, 0, made)  # npu-smi, while the driver is away

    with driver() as plugin:
        await up(plugin, dra_kubelet, 2)
        await until(lambda: spec_nodes(node, first[2]) is None, "the gone vNPU's spec removed at start")
        again = (await prepare(dra_kubelet, first)).claims[first[2]]
        assert again.devices == []
        assert (
            f"ResourceClaim default/first was prepared with a vNPU of template {VIR10} on chip 3, which is "
            in (again.error)
        )
        assert "delete the claim's pods" in again.error
        # The driver hands the freed id to the next claim: only that claim's spec names it.
        second = put_claim(apiserver, "second", [result("npu-3-vir10-3c-32g-1")])
        assert (await prepare(dra_kubelet, second)).claims[second[2]].error == ""
        given = recorded(node)[second[2]]["devices"][0]["vnpu"]["id"]
        assert spec_nodes(node, second[2]) == [f"/dev/vdavinci{given}"]
        assert spec_nodes(node, first[2]) is None
        # While the driver runs, too: the second claim's vNPU destroyed, preparing it again fails.
        the_driver(node).destroy_vdev(3, 0, given)
        refused = (await prepare(dra_kubelet, second)).claims[second[2]].error
        assert "which is gone" in refused
        assert spec_nodes(node, second[2]) is None
        for claim in (first, second):
            assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        assert recorded(node) == {}


async def test_a_torn_checkpoint_destroys_nothing_a_spec_names_and_its_claims_are_served_again(
    node: DraNode, driver: Callable[[], Any], dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    one = put_claim(apiserver, "one", [result("npu-3-vir10-3c-32g-0")])
    two = put_claim(apiserver, "two", [result("npu-5-vir10-3c-32g-0", "b")])
    with driver() as plugin:
        await up(plugin, dra_kubelet, 1)
        answers = await prepare(dra_kubelet, one, two)
    ids = {uid: recorded(node)[uid]["devices"][0]["vnpu"]["id"] for uid in (one[2], two[2])}
    library = the_driver(node)
    orphan = library.create_vdev(6, 0, "vir05_1c_16g").vdev_id  # no spec names it: no claim's
    text = node.checkpoint.read_text()
    node.checkpoint.write_text(text[: len(text) // 2])  # the disk kept half of it
    temporary = node.plugin_dir / ".checkpoint.json.tmp"
    temporary.write_text(text[:10])  # and a write the crash cut short

    with driver() as plugin:
        await up(plugin, dra_kubelet, 2)
        await until(lambda: library.vdev_ids(6, 0) == [], "the orphan, named by no spec, destroyed")
        assert library.vdev_ids(3, 0) == [ids[one[2]]], "the first claim's vNPU kept"
        assert library.vdev_ids(5, 0) == [ids[two[2]]], "the second claim's vNPU kept"
        assert not temporary.exists(), "the half-written temporary file removed at start"
        assert spec_nodes(node, one[2]) == [f"/dev/vdavinci{ids[one[2]]}"]
        assert spec_nodes(node, two[2]) == [f"/dev/vdavinci{ids[two[2]]}"]
        rebuilt = recorded(node)
        assert {uid: rebuilt[uid]["recovered"] for uid in rebuilt} == {one[2]: True, two[2]: True}
        (rebuilt_line,) = lines(plugin.lines(), PREPARE_LOG, level="WARNING", uids=sorted(rebuilt))
        assert f"{ids[one[2]]} on chip 3" in rebuilt_line["msg"], "the vNPUs kept are named"

        again = await prepare(dra_kubelet, one, two)
        assert again == answers, "the same devices, requests and CDI IDs as before the checkpoint was lost"
        assert "recovered" not in recorded(node)[one[2]]
        assert (await unprepare(dra_kubelet, one)).claims[one[2]].error == ""
        await until(lambda: library.vdev_ids(3, 0) == [], "unprepared: its vNPU destroyed")
        assert spec_nodes(node, one[2]) is None
        assert library.vdev_ids(5, 0) == [ids[two[2]]]
        assert orphan not in library.vdev_ids(6, 0)


async def test_with_the_checkpoint_torn_and_a_spec_unreadable_no_vnpu_is_destroyed(
    node: DraNode, driver: Callable[[], Any], dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    """What the unreadable spec named is not known: any vNPU might be its claim's, so none is destroyed."""
    one = put_claim(apiserver, "one", [result("npu-3-vir10-3c-32g-0")])
    two = put_claim(apiserver, "two", [result("npu-5-vir10-3c-32g-0")])
    with driver() as plugin:
        await up(plugin, dra_kubelet, 1)
        await prepare(dra_kubelet, one, two)
    made = recorded(node)[two[2]]["devices"][0]["vnpu"]["id"]
    library = the_driver(node)
    stray = library.create_vdev(6, 0, "vir05_1c_16g").vdev_id
    node.checkpoint.write_text("{")
    spec = node.cdi_dir / f"huawei.com-npu-claim-{two[2]}.json"
    spec.write_text("{not json")

    with driver() as plugin:
        await up(plugin, dra_kubelet, 2)
        await until(lambda: lines(plugin.lines(), KEEPER_LOG, level="ERROR"), "the hold is said")
        assert library.vdev_ids(5, 0) == [made], "the unreadable spec's claim keeps its vNPU"
        assert library.vdev_ids(6, 0) == [stray], "not even one no spec names: the unreadable one might"
        assert spec.read_text() == "{not json", "left where it is"
        assert (await prepare(dra_kubelet, one)).claims[one[2]].error == ""
