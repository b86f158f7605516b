"""What survives a restart of the driver: prepared claims and their CDI specs; an unreadable checkpoint."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from dra_harness import (
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
from waiting import until, wait_for

from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio

CHECKPOINT = "ascend_plugin.faces.dra.checkpoint"  # a checkpoint moved aside is its ERROR line


async def _run_until_registered(dra_kubelet: DraKubeletStandIn, times: int) -> None:
    await wait_for(dra_kubelet, lambda k: registered(k, times), f"registration {times}")


async def test_a_claim_prepared_before_a_restart_is_unprepared_after_it_without_the_api_server(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    claim = put_claim(apiserver, "train", [result("npu-0"), result("npu-1")])
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 1)
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    await apiserver.stop()  # the claim may even be gone by now: Unprepare must not need it
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 2)
        assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        assert dra_node.spec_files() == {}
        assert json.loads(dra_node.checkpoint.read_text())["claims"] == {}


async def test_a_claim_prepared_before_a_restart_is_answered_from_the_checkpoint(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    apiserver.add_node(NODE)
    claim = put_claim(apiserver, "train", [result("npu-4"), result("npu-5")])
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 1)
        before = await prepare(dra_kubelet, claim)
    await apiserver.stop()
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 2)
        after = await prepare(dra_kubelet, claim)
    assert bytes(after) == bytes(before)
    assert after.claims[claim[2]].error == ""


async def test_specs_are_put_back_and_strays_removed_at_start(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """/var/run is a tmpfs: after a reboot the kubelet still counts the claim prepared, the spec is gone."""
    apiserver.add_node(NODE)
    claim = put_claim(apiserver, "train", [result("npu-3")])
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 1)
        await prepare(dra_kubelet, claim)
    spec = dra_node.cdi_dir / f"huawei.com-npu-claim-{claim[2]}.json"
    content = spec.read_text()
    spec.unlink()
    stray = dra_node.cdi_dir / "huawei.com-npu-claim-1b2c3d4e-0000-4000-8000-000000000000.json"
    stray.write_text(content)
    foreign = dra_node.cdi_dir / "vendor.example-gpu.json"
    foreign.write_text("{}")
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 2)
        assert spec.read_text() == content
        assert not stray.exists()
        assert foreign.exists(), "other vendors' specs are not ours to touch"


async def test_an_unreadable_checkpoint_is_moved_aside_and_the_driver_serves(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.add_node(NODE)
    dra_node.plugin_dir.mkdir(parents=True)
    dra_node.checkpoint.write_text('{"format": 1, "claims": {"x": {"namespace": "default"')
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 1)
        claim = put_claim(apiserver, "train", [result("npu-0")])
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    aside = list(dra_node.plugin_dir.glob("checkpoint.json.bad-*"))
    assert len(aside) == 1
    assert aside[0].read_text().startswith('{"format": 1')
    (record,) = records(caplog, CHECKPOINT, level=logging.ERROR, checkpoint=str(dra_node.checkpoint))
    assert "not JSON" in record.__dict__["problem"]
    assert record.__dict__["moved_to"] == str(aside[0])


async def test_a_checkpoint_that_cannot_be_written_refuses_the_claim_and_leaves_no_spec(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> None:
    """The kubelet must not hear "prepared" of a claim a restart would forget."""
    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)):
        await _run_until_registered(dra_kubelet, 1)
        (dra_node.plugin_dir / ".checkpoint.json.tmp").mkdir()  # where the new checkpoint would be written
        claim = put_claim(apiserver, "train", [result("npu-0")])
        prepared = (await prepare(dra_kubelet, claim)).claims[claim[2]]
        assert f"cannot write the checkpoint {dra_node.checkpoint}" in prepared.error
        assert list(prepared.devices) == []
        assert dra_node.spec_files() == {}
        (dra_node.plugin_dir / ".checkpoint.json.tmp").rmdir()
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
    assert claim[2] in json.loads(dra_node.checkpoint.read_text())["claims"]


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: path.write_bytes(b'{"format": 1, "claims": {"\xc3\x28": {}}}'), "not UTF-8 text"),
        (lambda path: path.mkdir(), "not a regular file but a directory"),
    ],
    ids=["not-utf8", "directory"],
)
async def test_a_checkpoint_that_cannot_be_decoded_is_moved_aside_and_the_driver_serves(
    dra_node: DraNode,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    dra_kubelet: DraKubeletStandIn,
    caplog: pytest.LogCaptureFixture,
    make: Callable[[Path], object],
    problem: str,
) -> None:
    apiserver.add_node(NODE)
    dra_node.plugin_dir.mkdir(parents=True)
    make(dra_node.checkpoint)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await _run_until_registered(dra_kubelet, 1)
        claim = put_claim(apiserver, "train", [result("npu-0")])
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        await until(lambda: app.ready, "ready")
    assert len(list(dra_node.plugin_dir.glob("checkpoint.json.bad-*"))) == 1
    (record,) = records(caplog, CHECKPOINT, level=logging.ERROR, checkpoint=str(dra_node.checkpoint))
    assert record.problem.startswith(problem)  # type: ignore[attr-defined]
    assert claim[2] in json.loads(dra_node.checkpoint.read_text())["claims"]
