"""Which chips hot reset: by the level of the chip's worst fault, as Huawei's current plugin decides.

RestartRequest, RestartBusiness, FreeRestartNPU and RestartNPU are reset;
SeparateNPU and ManuallySeparateNPU never are, they are named for an operator;
the other levels are left alone. The faulty chip's health must still be bad:
a health of 0 puts the reset off (Huawei's rule), a card that answers -8012
(dropped off the bus) is reset.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import (
    FREE_RESTART_NPU,
    PRE_SEPARATE_NPU,
    RESTART_BUSINESS,
    RESTART_NPU,
    RESTART_REQUEST,
    SEPARATE_NPU,
    RigParts,
    node_scenario,
    polled_on,
    reset_rig,
)
from waiting import until

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.hot_reset.manual import Listed
from ascend_plugin.hot_reset.rules import Remedy, remedy_for

REMEDIES = {
    FaultLevel.NormalNPU: Remedy.NONE,
    FaultLevel.NotHandleFault: Remedy.NONE,
    FaultLevel.SubHealthFault: Remedy.NONE,
    FaultLevel.RestartRequest: Remedy.RESET,
    FaultLevel.RestartBusiness: Remedy.RESET,
    FaultLevel.FreeRestartNPU: Remedy.RESET,
    FaultLevel.RestartNPU: Remedy.RESET,
    FaultLevel.PreSeparateNPU: Remedy.NONE,
    FaultLevel.SeparateNPU: Remedy.MANUAL,
    FaultLevel.ManuallySeparateNPU: Remedy.MANUAL,
}


def test_every_level_has_its_remedy() -> None:
    assert {level: remedy_for(level) for level in FaultLevel} == REMEDIES


@pytest.mark.anyio
@pytest.mark.parametrize("code", [RESTART_REQUEST, RESTART_BUSINESS, FREE_RESTART_NPU, RESTART_NPU])
async def test_the_reset_levels_are_reset(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts, code: str
) -> None:
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({1: code}))
        await rig.reset_done(1)
        await rig.healthy(0, 1, 2, 3)


@pytest.mark.anyio
async def test_a_separated_chip_is_named_for_an_operator_and_never_reset(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({2: SEPARATE_NPU}))
        listed = await until(lambda: rig.manager.manual.get(2), "chip 2 named")
        assert listed.listed is Listed.SEPARATED
        assert listed.why == "SeparateNPU: a separated chip is never reset"
        await polled_on(rig)
        assert rig.resets() == {}
        assert rig.manager.waiting == {}


@pytest.mark.anyio
async def test_a_pre_separated_chip_is_left_alone(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({2: PRE_SEPARATE_NPU}))
        await until(lambda: rig.health(2) == "Unhealthy", "chip 2 unhealthy")
        await polled_on(rig)
        assert rig.resets() == {}
        assert (rig.manager.waiting, rig.manager.manual.entries()) == ({}, ())


@pytest.mark.anyio
async def test_a_chip_whose_health_reads_0_is_not_reset(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        healthy_value = node_scenario({0: RESTART_NPU}, chip={0: {"health": 0}})
        rig.write(healthy_value)
        waiting = await until(lambda: rig.manager.waiting.get(0), "chip 0 put off")
        await until(lambda: "health 0" in rig.manager.waiting[0].busy, "put off for its health")
        assert waiting.free_since is None, "a reset put off does not count its group as free"
        await polled_on(rig)
        assert rig.resets() == {}
        assert rig.manager.budget.left(0) == rig.manager.budget.resets, "none of its resets spent"
        history = rig.kubelet.resources["huawei.com/Ascend910"].history
        assert {devices["Ascend910-1"] for _, devices in history} == {"Healthy"}  # never taken out


@pytest.mark.anyio
async def test_a_dropped_card_is_reset(any_fake: ScenarioPlayer[Any], reset_parts: RigParts) -> None:
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario(chip={3: {"errors": {"health": -8012}}}))  # the card drop code: RestartNPU
        await rig.reset_done(3)
