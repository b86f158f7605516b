"""vnpu=dynamic when the driver says no: a vNPU in use, a create that hangs, a chip that cannot be listed.

Each failure is the claim's error, in words, and leaves nothing behind: no
vNPU that no claim owns, no record of a claim that was not answered prepared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dra_harness import (
    A2_SERVER,
    NODE,
    DraNode,
    prepare,
    put_claim,
    registered,
    result,
    running_driver,
    unprepare,
)
from fake_apiserver import FakeApiServer
from log_records import records
from read_only import read_only
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake.library import FakeLibrary

pytestmark = pytest.mark.anyio

VIR10 = "npu-3-vir10-3c-32g-0"
KEEPER = "ascend_plugin.faces.dra.vnpus"


def with_chip(dra_node: DraNode, phy: int, **fields: Any) -> None:
    """Rewrite the scenario with ``fields`` set on chip ``phy`` (the plugin re-reads it)."""
    scenario = dra_node.read()
    scenario["chips"] = [{**chip, **fields} if chip["phy_id"] == phy else chip for chip in scenario["chips"]]
    dra_node.write(scenario)


@pytest.fixture
async def dynamic(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> AsyncIterator[PluginApp]:
    dra_node.write({**A2_SERVER, "vdev_node_dir": str(dra_node.host_root / "dev")})
    apiserver.kube_version = "1.36"
    apiserver.add_node(NODE)
    # Two vNPUs of one template on one chip: the second partition of each must be published.
    settings = dra_node.settings(kubeconfig, vnpu="dynamic", dcmi_call_timeout=0.5, dra_partition_places=2)
    async with running_driver(settings) as app:
        await wait_for(dra_kubelet, registered, "registered")
        yield app


def made_on(app: PluginApp, phy: int) -> list[int]:
    assert app.inventory is not None
    state = app.inventory.get(phy)
    assert state is not None
    return [vnpu.vdev_id for vnpu in state.vnpus or ()]


def the_driver(dra_node: DraNode) -> FakeLibrary:
    """The fake driver as another program on the node sees it (npu-smi)."""
    library = FakeLibrary(dra_node.scenario)
    library.init()
    return library


def recorded(dra_node: DraNode) -> dict[str, Any]:
    claims: dict[str, Any] = json.loads(dra_node.checkpoint.read_text())["claims"]
    return claims


async def test_a_vnpu_still_in_use_fails_unprepare_until_its_container_lets_go(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    (vdev,) = await until(lambda: made_on(dynamic, 3), "made")
    with_chip(dra_node, 3, vdev_usage={str(vdev): {"in_use": True}})
    await until(
        lambda: (
            dynamic.inventory is not None
            and any(
                v.in_use
                for v in dynamic.inventory.get(3).vnpus or ()  # type: ignore[union-attr]
            )
        ),
        "the driver says a container uses it",
    )
    error = (await unprepare(dra_kubelet, claim)).claims[claim[2]].error
    assert f"cannot destroy vNPU {vdev}" in error
    assert "a container still uses it" in error
    assert "the kubelet retries" in error
    assert claim[2] in recorded(dra_node), "still prepared: the kubelet retries"
    with_chip(dra_node, 3, vdev_usage={})
    await until(
        lambda: (
            dynamic.inventory is not None
            and not any(
                v.in_use
                for v in dynamic.inventory.get(3).vnpus or ()  # type: ignore[union-attr]
            )
        ),
        "let go",
    )
    assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    await until(lambda: made_on(dynamic, 3) == [], "destroyed")
    assert recorded(dra_node) == {}


async def test_a_create_that_hangs_is_the_claim_s_error_and_what_it_leaves_is_swept(
    dynamic: PluginApp,
    dra_kubelet: DraKubeletStandIn,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with_chip(dra_node, 3, hang=["create_vdev"])
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    error = (await prepare(dra_kubelet, claim)).claims[claim[2]].error
    assert "cannot make a vNPU of template vir10_3c_32g on Ascend910-3" in error
    assert "did not return within 0.5 s" in error
    assert claim[2] not in recorded(dra_node)
    with_chip(dra_node, 3, hang=[])  # the abandoned call finishes in the driver: a vNPU nobody owns
    assert dynamic.dra is not None
    assert dynamic.dra.keeper is not None
    keeper = dynamic.dra.keeper
    # Destroyed as soon as a poll shows it, not left until the next claim: meanwhile the chip is split,
    # and no claim could have it whole.
    await until(lambda: keeper.swept == 1, "the late vNPU destroyed once it appeared")
    await until(lambda: made_on(dynamic, 3) == [], "chip 3 shows no vNPU")
    (said,) = records(caplog, KEEPER, level=logging.WARNING, chip=3)
    assert "no prepared claim owns it" in said.getMessage()
    await until(lambda: dynamic.calls.stuck(3) is None, "chip 3's lane free again")
    whole = put_claim(apiserver, "whole", [result("npu-3")])
    assert (await prepare(dra_kubelet, whole)).claims[whole[2]].error == "", "the chip can be given whole"
    assert (await unprepare(dra_kubelet, whole)).claims[whole[2]].error == ""
    other = put_claim(apiserver, "other", [result("npu-3-vir10-3c-32g-1")])
    assert (await prepare(dra_kubelet, other)).claims[other[2]].error == ""
    owned = recorded(dra_node)[other[2]]["devices"][0]["vnpu"]["id"]
    await until(lambda: made_on(dynamic, 3) == [owned], "only the other claim's vNPU on the chip")


async def test_a_driver_refusal_other_than_room_is_said_as_the_driver_said_it(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    with_chip(dra_node, 4, errors={"create_vdev": -8005})
    claim = put_claim(apiserver, "infer", [result("npu-4-vir05-1c-16g-0")])
    error = (await prepare(dra_kubelet, claim)).claims[claim[2]].error
    assert "the driver refused a vNPU of template vir05_1c_16g on Ascend910-4" in error
    assert "-8005" in error
    assert made_on(dynamic, 4) == []


async def test_an_unprepare_whose_checkpoint_cannot_be_written_never_destroys_a_later_claim_s_vnpu(
    dynamic: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    """The vNPU is destroyed before the checkpoint is rewritten; if that write fails, the driver still
    knows the vNPU is gone: the driver hands its id to the next claim, and the kubelet's retry of the
    unprepare must not destroy that one."""
    first = put_claim(apiserver, "first", [result(VIR10)])
    assert (await prepare(dra_kubelet, first)).claims[first[2]].error == ""
    (vdev,) = await until(lambda: made_on(dynamic, 3), "made")
    with read_only(dra_node.plugin_dir) as directory:
        error = (await unprepare(dra_kubelet, first)).claims[first[2]].error
        assert f"cannot write the checkpoint {dra_node.checkpoint}" in error
        await until(lambda: made_on(dynamic, 3) == [], "destroyed before the write failed")
        directory.off()
        second = put_claim(apiserver, "second", [result("npu-3-vir10-3c-32g-1")])
        assert (await prepare(dra_kubelet, second)).claims[second[2]].error == ""
        assert recorded(dra_node)[second[2]]["devices"][0]["vnpu"]["id"] == vdev, "the driver reuses the id"
        assert recorded(dra_node)[first[2]]["devices"][0]["vnpu"]["id"] is None, "written down as gone"
        assert (await unprepare(dra_kubelet, first)).claims[first[2]].error == "", "the kubelet's retry"
    assert first[2] not in recorded(dra_node)
    assert dynamic.dra is not None
    assert dynamic.dra.keeper is not None
    assert dynamic.dra.keeper.destroyed == 1, "the second claim's vNPU was left alone"
    assert the_driver(dra_node).vdev_ids(3, 0) == [vdev]


async def test_unprepare_leaves_alone_a_vnpu_of_another_template_made_since_under_the_claim_s_id(
    dynamic: PluginApp,
    dra_kubelet: DraKubeletStandIn,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    claim = put_claim(apiserver, "infer", [result(VIR10)])
    assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    (vdev,) = await until(lambda: made_on(dynamic, 3), "made")
    outside = the_driver(dra_node)  # npu-smi, run by hand on the node
    outside.destroy_vdev(3, 0, vdev)
    assert outside.create_vdev(3, 0, "vir05_1c_16g").vdev_id == vdev, "the driver hands out the id again"
    assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    assert outside.vdev_ids(3, 0) == [vdev], "not destroyed"
    (said,) = records(caplog, KEEPER, level=logging.WARNING, vnpu=vdev)
    assert "is of template vir05_1c_16g, not vir10_3c_32g" in said.getMessage()
    assert claim[2] not in recorded(dra_node)
