"""Prepare and Unprepare run one at a time, whatever the kubelet sends at once; the checkpoint stays whole."""

from __future__ import annotations

import json

import anyio
import pytest
from dra_harness import DraNode, prepare, put_claim, result, unprepare
from fake_apiserver import FakeApiServer

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio


async def test_two_claims_racing_for_one_chip_get_it_once(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, apiserver: FakeApiServer
) -> None:
    """Without the lock both would read their claim, both see the chip free, and both be prepared."""
    claims = [put_claim(apiserver, f"racer-{index}", [result("npu-0")]) for index in range(4)]
    errors: dict[str, str] = {}

    async def ask(claim: tuple[str, str, str]) -> None:
        errors[claim[2]] = (await prepare(dra_kubelet, claim)).claims[claim[2]].error

    async with anyio.create_task_group() as group:
        for claim in claims:
            group.start_soon(ask, claim)
    winners = [uid for uid, error in errors.items() if not error]
    assert len(winners) == 1
    assert all(
        "device npu-0 is prepared for ResourceClaim" in errors[c[2]] for c in claims if c[2] not in winners
    )


async def test_concurrent_prepares_and_unprepares_leave_exactly_the_prepared_claims(
    dra_driver: PluginApp, dra_kubelet: DraKubeletStandIn, dra_node: DraNode, apiserver: FakeApiServer
) -> None:
    claims = [put_claim(apiserver, f"job-{phy}", [result(f"npu-{phy}")]) for phy in range(8)]
    kept = {claim[2] for claim in claims[::2]}

    async def cycle(claim: tuple[str, str, str]) -> None:
        for _ in range(3):
            assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
            if claim[2] not in kept:
                assert (await unprepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        assert (await prepare(dra_kubelet, claim)).claims[claim[2]].error == ""
        if claim[2] not in kept:
            await unprepare(dra_kubelet, claim)

    async with anyio.create_task_group() as group:
        for claim in claims:
            group.start_soon(cycle, claim)
    assert set(json.loads(dra_node.checkpoint.read_text())["claims"]) == kept
    assert {
        name.removeprefix("huawei.com-npu-claim-").removesuffix(".json") for name in dra_node.spec_files()
    } == kept
