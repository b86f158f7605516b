"""vnpu=dynamic: a partition's vNPU is made when its claim is prepared and destroyed when it is unprepared.

The fake driver (backends/fake) makes and destroys vNPUs with Huawei's rules
and keeps them in its state file beside the scenario, as a real driver keeps
them in the device: a restarted plugin finds them. The allocation is written
as the scheduler writes it; the kubelet stand-in calls the driver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dra_harness import (
    A2_SERVER,
    CDI_KIND,
    DUO_SERVER,
    NODE,
    DraNode,
    make_dra_node,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
    unprepare,
)
from fake_apiserver import FakeApiServer
from log_records import records
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake.library import FakeLibrary

pytestmark = pytest.mark.anyio

VIR10 = "npu-3-vir10-3c-32g-0"


@pytest.fixture
def split_node(dra_node: DraNode) -> DraNode:
    """The A2 server, its driver making /dev/vdavinci<N> under the host root."""
    dra_node.write({**A2_SERVER, "vdev_node_dir": str(dra_node.host_root / "dev")})
    return dra_node


@pytest.fixture
async def dynamic(
    split_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> AsyncIterator[PluginApp]:
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    # Two vNPUs of one template on one chip: the second partition of each must be published.
    async with running_driver(split_node.settings(kubeconfig, vnpu="dynamic", dra_partition_places=2)) as app:
        await wait_for(dra_kubelet, registered, "registered")
        yield app


def vnpus_on(app: PluginApp, phy: int) -> list[tuple[int, str]]:
    """What the health monitor last read of a chip's vNPUs (through the chip library)."""
    assert app.inventory is not None
    state = app.inventory.get(phy)
    assert state is not None
    return [(vnpu.vdev_id, vnpu.template) for vnpu in state.vnpus or ()]


def driver_library(node: DraNode) -> FakeLibrary:
    """The fake driver as another program on the node sees it (npu-smi, a plugin that died)."""
    library = FakeLibrary(node.scenario)
    library.init()
    return library


async def test_preparing_a_partition_makes_its_vnpu_and_hands_it_over(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, split_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    uid = claim[2]
    answer = (await prepare(dra_kubelet, claim)).claims[uid]
    assert answer.error == ""
    ((device_name, cdi_ids),) = [(d.device_name, d.cdi_device_ids) for d in answer.devices]
    assert (device_name, cdi_ids) == (VIR10, [f"{CDI_KIND}={uid}-{VIR10}"])
    (vdev_id, template) = (await until(lambda: vnpus_on(dynamic, 3), "the vNPU is seen on chip 3"))[0]
    assert template == "vir10_3c_32g"
    assert 148 <= vdev_id <= 163, "in chip 3's range, phy*16+100 .. +115"
    spec = split_node.spec_files()[f"huawei.com-npu-claim-{uid}.json"]
    (node,) = spec["devices"][0]["containerEdits"]["deviceNodes"]
    assert (node["hostPath"], node["path"]) == (f"/dev/vdavinci{vdev_id}", f"/dev/davinci{vdev_id}")
    assert (split_node.host_root / f"dev/vdavinci{vdev_id}").exists(), "the driver made the node"
    record = json.loads(split_node.checkpoint.read_text())["claims"][uid]
    assert record["state"] == "prepared"
    assert record["devices"][0]["vnpu"] == {"chip": 3, "template": "vir10_3c_32g", "id": vdev_id}


async def test_a_repeated_prepare_gets_the_same_vnpu_and_unprepare_destroys_it(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, split_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    first = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    again = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    assert again == first
    assert dynamic.dra is not None
    assert dynamic.dra.keeper is not None
    assert dynamic.dra.keeper.made == 1, "not a second vNPU"
    assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    await until(lambda: vnpus_on(dynamic, 3) == [], "the vNPU destroyed")
    assert split_node.spec_files() == {}
    assert json.loads(split_node.checkpoint.read_text())["claims"] == {}
    assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == "", "again: nothing to do"


async def test_partitions_share_a_chip_until_it_is_full_then_the_driver_s_refusal_is_the_claim_s_error(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, split_node: DraNode, apiserver: FakeApiServer
) -> None:
    one = put_claim(apiserver, "one", [result("npu-3-vir10-3c-32g-0")])
    two = put_claim(apiserver, "two", [result("npu-3-vir10-3c-32g-1")])
    answers = await prepare(dra_kubelet, one, two)
    assert [answers.claims[c[2]].error for c in (one, two)] == ["", ""]
    # Counters keep the scheduler from this; a stale allocation still meets the driver's own rule.
    three = put_claim(apiserver, "three", [result("npu-3-vir05-1c-16g-0")])
    refused = (await prepare(dra_kubelet, three)).claims[three[2]].error
    assert "Ascend910-3 has no room for a vNPU of template vir05_1c_16g" in refused
    assert "-8020" in refused
    assert three[2] not in json.loads(split_node.checkpoint.read_text())["claims"]
    await until(lambda: len(vnpus_on(dynamic, 3)) == 2, "two vNPUs, not three")


async def test_a_claim_gets_all_of_its_vnpus_or_none(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, split_node: DraNode, apiserver: FakeApiServer
) -> None:
    first = put_claim(apiserver, "first", [result("npu-5-vir10-3c-32g-0")])
    assert (await prepare(dra_kubelet, first)).claims[first[2]].error == ""
    both = put_claim(apiserver, "both", [result("npu-4-vir10-3c-32g-0"), result("npu-5-vir10-3c-32g-1", "b")])
    assert (await prepare(dra_kubelet, both)).claims[both[2]].error == ""
    greedy = put_claim(
        apiserver, "greedy", [result("npu-6-vir10-3c-32g-0"), result("npu-5-vir05-1c-16g-0", "b")]
    )
    assert "no room" in (await prepare(dra_kubelet, greedy)).claims[greedy[2]].error
    await until(lambda: vnpus_on(dynamic, 6) == [], "chip 6's vNPU taken back: the claim got none")


async def test_a_whole_chip_carrying_vnpus_is_refused(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    part = put_claim(apiserver, "part", [result(VIR10)])
    assert (await prepare(dra_kubelet, part)).claims[part[2]].error == ""
    await until(lambda: vnpus_on(dynamic, 3), "seen")
    whole = put_claim(apiserver, "whole", [result("npu-3")])
    error = (await prepare(dra_kubelet, whole)).claims[whole[2]].error
    assert "npu-3 is split into vNPUs; a chip that carries vNPUs is never given whole" in error


async def test_after_a_restart_a_prepared_claim_keeps_its_vnpu_and_orphans_are_destroyed(
    split_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    settings = split_node.settings(kubeconfig, vnpu="dynamic")
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    async with running_driver(settings):
        await wait_for(dra_kubelet, registered, "registered")
        first = (await prepare(dra_kubelet, claim)).claims[claim[2]]
    kept = json.loads(split_node.checkpoint.read_text())["claims"][claim[2]]["devices"][0]["vnpu"]["id"]
    # While the plugin is away: npu-smi (or a plugin killed before it wrote the id down) makes two more.
    library = driver_library(split_node)
    orphans = [
        library.create_vdev(3, 0, "vir05_1c_16g").vdev_id,
        library.create_vdev(6, 0, "vir05_1c_16g").vdev_id,
    ]
    async with running_driver(settings) as app:
        await wait_for(dra_kubelet, lambda k: registered(k, 2), "registered again")
        again = (await prepare(dra_kubelet, claim)).claims[claim[2]]
        await until(lambda: vnpus_on(app, 3) == [(kept, "vir10_3c_32g")] and vnpus_on(app, 6) == [], "swept")
    assert again == first, "the same vNPU, not a second one"
    destroyed = [r for r in caplog.records if "no prepared claim owns it" in r.getMessage()]
    assert sorted(r.vnpu for r in destroyed) == sorted(orphans), "one line each"
    assert {r.levelno for r in destroyed} == {logging.WARNING}


def claim_record(name: str, state: str, device: str, vnpu: dict[str, Any]) -> dict[str, Any]:
    """A claim as the checkpoint holds it: one device with its vNPU (chip, template, id)."""
    return {
        "namespace": "default",
        "name": name,
        "pool": NODE,
        "state": state,
        "devices": [
            {
                "device": device,
                "requests": ["npus"],
                "cdiDeviceIDs": [],
                "adminAccess": False,
                "vnpu": vnpu,
            }
        ],
    }


def write_checkpoint(node: DraNode, claims: dict[str, dict[str, Any]]) -> None:
    node.plugin_dir.mkdir(parents=True)
    node.checkpoint.write_text(json.dumps({"format": 2, "claims": claims}))


PREPARE_LOG = "ascend_plugin.faces.dra.prepare"


@dataclass
class Restart:
    """A node whose checkpoint and driver a test writes before the plugin starts again on it."""

    node: DraNode
    apiserver: FakeApiServer
    kubeconfig: Path
    kubelet: DraKubeletStandIn

    @asynccontextmanager
    async def driver(self, **settings: Any) -> AsyncIterator[PluginApp]:
        self.apiserver.kube_version = "1.36"
        self.apiserver.add_node(NODE)
        async with running_driver(self.node.settings(self.kubeconfig, **settings)) as app:
            await wait_for(self.kubelet, registered, "registered")
            yield app


@pytest.fixture
def restart(
    split_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> Restart:
    return Restart(split_node, apiserver, kubeconfig, dra_kubelet)


async def test_a_claim_found_preparing_at_start_is_dropped_and_its_vnpu_destroyed(
    restart: Restart, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin died after making the vNPU, before the claim was written down as prepared."""
    made = driver_library(restart.node).create_vdev(2, 0, "vir10_3c_32g").vdev_id
    vnpu = {"chip": 2, "template": "vir10_3c_32g", "id": None}
    write_checkpoint(
        restart.node, {"uid-x": claim_record("infer", "preparing", "npu-2-vir10-3c-32g-0", vnpu)}
    )
    async with restart.driver(vnpu="dynamic") as app:
        await until(lambda: vnpus_on(app, 2) == [], f"vNPU {made} destroyed")
    assert json.loads(restart.node.checkpoint.read_text())["claims"] == {}
    (said,) = records(caplog, PREPARE_LOG, level=logging.WARNING, uid="uid-x")
    assert "the vNPUs made for it are destroyed with every vNPU no prepared claim owns" in said.getMessage()


async def test_without_dynamic_vnpus_a_dropped_claim_s_vnpus_are_named_with_the_command_that_destroys_them(
    restart: Restart, caplog: pytest.LogCaptureFixture
) -> None:
    """A plugin restarted without vnpu=dynamic destroys nothing; its log says what is left and how to go."""
    library = driver_library(restart.node)
    made = library.create_vdev(2, 0, "vir10_3c_32g").vdev_id
    kept = library.create_vdev(3, 0, "vir10_3c_32g").vdev_id
    template = "vir10_3c_32g"
    write_checkpoint(
        restart.node,
        {
            "uid-x": claim_record(
                "infer", "preparing", "npu-2-vir10-3c-32g-0", {"chip": 2, "template": template, "id": None}
            ),
            "uid-y": claim_record(
                "other", "preparing", "npu-2-vir10-3c-32g-1", {"chip": 2, "template": template, "id": made}
            ),
            "uid-z": claim_record(
                "kept", "prepared", "npu-3-vir10-3c-32g-0", {"chip": 3, "template": template, "id": kept}
            ),
        },
    )
    async with restart.driver():
        pass  # registered: the checkpoint was read, what it holds restored or dropped
    assert list(json.loads(restart.node.checkpoint.read_text())["claims"]) == ["uid-z"]
    (unmade,) = records(caplog, PREPARE_LOG, level=logging.WARNING, uid="uid-x")
    assert (
        "vnpu=dynamic is off now, so nothing destroys what was made for it; destroy by hand a vNPU of "
        "template vir10_3c_32g on chip 2, if it was made (npu-smi info -t info-vnpu -i 2 -c 0 lists them; "
        "npu-smi set -t destroy-vnpu -i 2 -c 0 -v <id> destroys one no pod uses)"
    ) in unmade.getMessage()
    (left,) = records(caplog, PREPARE_LOG, level=logging.WARNING, uid="uid-y")
    assert f"destroy by hand vNPU {made} on chip 2 (npu-smi set -t destroy-vnpu -i 2 -c 0 -v {made})" in (
        left.getMessage()
    )
    (unkept,) = records(caplog, PREPARE_LOG, level=logging.WARNING, uid="uid-z")
    assert f"{kept} on chip 3 (npu-smi set -t destroy-vnpu -i 3 -c 0 -v {kept})" in unkept.getMessage()
    assert library.vdev_ids(2, 0) == [made], "none destroyed"
    assert library.vdev_ids(3, 0) == [kept]


SHARE_IDS = ("6f1c0b6e-0b8f-4c2e-9f55-000000000001", "6f1c0b6e-0b8f-4c2e-9f55-000000000002")


async def test_shares_of_one_chip_are_prepared_and_unprepared_each_on_its_own(
    short_tmp: Path, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet_for: Any
) -> None:
    node = make_dra_node(short_tmp / "duo", DUO_SERVER)
    kubelet = await dra_kubelet_for(node)
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    async with running_driver(node.settings(kubeconfig, share_count=2)):
        await wait_for(kubelet, registered, "registered")
        shares = [
            put_claim(
                apiserver, f"share-{n}", [result("npu-1", shareID=share, consumedCapacity={"shares": "1"})]
            )
            for n, share in enumerate(SHARE_IDS)
        ]
        answers = await prepare(kubelet, *shares)
        devices = [answers.claims[claim[2]].devices for claim in shares]
        assert [[(d.device_name, d.share_id) for d in found] for found in devices] == [
            [("npu-1", SHARE_IDS[0])],
            [("npu-1", SHARE_IDS[1])],
        ]
        whole = put_claim(apiserver, "whole", [result("npu-1")])
        assert "is prepared for ResourceClaim" in (await prepare(kubelet, whole)).claims[whole[2]].error
        assert (await unprepare(kubelet, shares[0])).claims[shares[0][2]].error == ""
        claims = json.loads(node.checkpoint.read_text())["claims"]
        assert list(claims) == [shares[1][2]]
        assert claims[shares[1][2]]["devices"][0]["shareID"] == SHARE_IDS[1]


async def test_without_dynamic_vnpus_a_partition_is_not_prepared(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    error = (await prepare(dra_kubelet, claim)).claims[claim[2]].error
    assert f"device {VIR10} is not a device of pool {NODE}" in error, "the catalog has no partitions"


@pytest.fixture
async def unpolled(
    split_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> AsyncIterator[PluginApp]:
    """The dynamic driver whose health polls never come after the first (an hour apart): what it knows
    of the vNPUs it made is its claims alone."""
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    async with running_driver(split_node.settings(kubeconfig, vnpu="dynamic", health_interval=3600.0)) as app:
        await wait_for(dra_kubelet, registered, "registered")
        yield app


async def test_a_chip_held_whole_is_not_split_and_one_split_is_not_given_whole(
    unpolled: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    dynamic = unpolled
    whole = put_claim(apiserver, "whole", [result("npu-1")])
    assert (await prepare(dra_kubelet, whole)).claims[whole[2]].error == ""
    part = put_claim(apiserver, "part", [result("npu-1-vir05-1c-16g-0")])
    error = (await prepare(dra_kubelet, part)).claims[part[2]].error
    assert "is a partition of a chip of which ResourceClaim default/whole" in error
    assert vnpus_on(dynamic, 1) == [], "nothing made"
    split = put_claim(apiserver, "split", [result("npu-2-vir05-1c-16g-0")])
    also_whole = put_claim(apiserver, "also-whole", [result("npu-2")])
    answers = await prepare(dra_kubelet, split, also_whole)  # no health poll sees the vNPU
    assert answers.claims[split[2]].error == ""
    assert "is the whole chip of which ResourceClaim default/split" in answers.claims[also_whole[2]].error


async def test_a_chip_whose_vnpu_claim_went_is_given_whole_at_once(
    split_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """The real kubelet prepares the next claim within a second of unpreparing the last: a chip whose only
    vNPU was just destroyed is free, whatever the last health poll saw (polls are 2 s apart here)."""
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    settings = split_node.settings(kubeconfig, vnpu="dynamic", health_interval=2.0)
    async with running_driver(settings) as app:
        await wait_for(dra_kubelet, registered, "registered")
        part = put_claim(apiserver, "part", [result("npu-3-vir05-1c-16g-0")])
        assert (await prepare(dra_kubelet, part)).claims[part[2]].error == ""
        await until(lambda: vnpus_on(app, 3), "a health poll saw the vNPU")
        assert (await unprepare(dra_kubelet, part)).claims[part[2]].error == ""
        whole = put_claim(apiserver, "whole", [result("npu-3")])
        assert (await prepare(dra_kubelet, whole)).claims[whole[2]].error == ""
