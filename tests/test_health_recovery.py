"""Recovery and damping: cleared faults recover, flappers are held, failed queries are not health."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored
from log_records import records

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.damping import DampingPolicy
from ascend_plugin.inventory.monitor import HealthPolicy
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

DEVICE = "Ascend310P-0"
POLICY = HealthPolicy(
    failure_threshold=3, damping=DampingPolicy(flap_threshold=3, flap_window=60.0, flap_hold=30.0)
)


def _chip(**chip: object) -> FakeScenario:
    return FakeScenario.model_validate({"chip_name": "310P3", "chips": [{"phy_id": 0, **chip}]})


@pytest.fixture
def watched(any_fake: ScenarioPlayer[Any], anyio_backend: str) -> Iterator[Monitored]:
    """A 310P3 chip, on either fake, under a monitor with a hand-moved clock."""
    with monitored(any_fake.open(_chip()), policy=POLICY) as watched:
        yield watched


async def _poll(watched: Monitored, node: ScenarioPlayer[Any], **chip: object) -> bool:
    node.update(_chip(**chip))
    await watched.monitor.poll_all()
    return watched.device(DEVICE).healthy


async def test_a_cleared_fault_recovers_at_once(any_fake: ScenarioPlayer[Any], watched: Monitored) -> None:
    assert not await _poll(watched, any_fake, fault_codes=["80818C00"])
    assert await _poll(watched, any_fake, fault_codes=[])
    assert watched.device(DEVICE).reason == ""
    assert watched.device(DEVICE).faults == ()


async def test_a_flapping_chip_is_held_until_clean_for_the_hold_time(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    for _ in range(2):  # two spells: still allowed to recover at once
        assert not await _poll(watched, any_fake, fault_codes=["80818C00"])
        watched.clock.advance(1)
        assert await _poll(watched, any_fake, fault_codes=[])
        watched.clock.advance(1)
    assert not await _poll(watched, any_fake, fault_codes=["80818C00"])  # third spell: a flapper
    watched.clock.advance(1)
    assert not await _poll(watched, any_fake, fault_codes=[])
    assert watched.device(DEVICE).reason.startswith("flapping (3 unhealthy spells within 60 s)")
    watched.clock.advance(29)
    assert not await _poll(watched, any_fake, fault_codes=[])
    watched.clock.advance(1.5)
    assert await _poll(watched, any_fake, fault_codes=[])


async def test_a_fault_during_the_hold_restarts_the_clean_period(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    for _ in range(3):
        await _poll(watched, any_fake, fault_codes=["80818C00"])
        await _poll(watched, any_fake, fault_codes=[])
    watched.clock.advance(25)
    assert not await _poll(watched, any_fake, fault_codes=["80818C00"])
    watched.clock.advance(10)
    assert not await _poll(watched, any_fake, fault_codes=[])  # clean again only just now
    watched.clock.advance(29)
    assert not await _poll(watched, any_fake, fault_codes=[])
    watched.clock.advance(2)
    assert await _poll(watched, any_fake, fault_codes=[])


async def test_spells_outside_the_window_do_not_count(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    for _ in range(3):
        await _poll(watched, any_fake, fault_codes=["80818C00"])
        watched.clock.advance(40)  # spells 40 s apart: never three within 60 s
        assert await _poll(watched, any_fake, fault_codes=[])


async def test_failed_queries_count_as_unhealthy_only_after_the_threshold(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    assert await _poll(watched, any_fake)
    assert await _poll(watched, any_fake, errors={"health": -8010})
    assert await _poll(watched, any_fake, errors={"health": -8010})
    assert not await _poll(watched, any_fake, errors={"health": -8010})
    assert watched.device(DEVICE).reason == (
        "health query failed 3 times in a row: dcmi_get_device_health returned -8010 (send message failed)"
    )
    assert await _poll(watched, any_fake)  # one good answer is enough to recover


async def test_a_success_between_failures_resets_the_count(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    assert await _poll(watched, any_fake)
    for _ in range(3):
        assert await _poll(watched, any_fake, errors={"error_codes": -8006})
        assert await _poll(watched, any_fake, errors={"error_codes": -8006})
        assert await _poll(watched, any_fake)


async def test_a_chip_still_flapping_is_never_released_however_old_its_spells_get(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    # The chip's health flips every 200 ms; a poll a second lands on either state. Its spells age
    # out of the 60 s window, and a damper counting only those would release it without its ever
    # having been clean for the hold.
    held_since = None
    for tick in range(181):  # the last poll (tick 180) finds it faulty
        faulty = (tick * 5 // 2) % 2 == 0  # the state at this poll of a 200 ms square wave
        healthy = await _poll(watched, any_fake, fault_codes=["80818C00"] if faulty else [])
        if held_since is None and not healthy and tick > 0 and not faulty:
            held_since = tick
        if held_since is not None:
            assert not healthy, f"released at {tick} s while still flapping"
        watched.clock.advance(1)
    assert held_since is not None
    reason = watched.device(DEVICE).reason
    assert reason.startswith("flapping (") or reason.startswith("fault ")
    # Clean from now on: released only after the whole hold.
    for _ in range(30):
        assert not await _poll(watched, any_fake, fault_codes=[])
        assert "held until clean for 30 s; clean since" in watched.device(DEVICE).reason
        assert "if it stays clean" in watched.device(DEVICE).reason
        watched.clock.advance(1)
    assert await _poll(watched, any_fake, fault_codes=[])


async def test_a_chip_held_for_flapping_says_so_once_when_it_looks_healthy(
    any_fake: ScenarioPlayer[Any], watched: Monitored, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        assert not await _poll(watched, any_fake, fault_codes=["80818C00"])
        watched.clock.advance(1)
        await _poll(watched, any_fake, fault_codes=[])
        watched.clock.advance(1)
    for _ in range(5):  # clean, held: the reason is in its state, the line is said once
        assert not await _poll(watched, any_fake, fault_codes=[])
        watched.clock.advance(1)
    (said,) = records(caplog, "ascend_plugin.inventory.damping", level=logging.WARNING)
    assert said.getMessage().startswith(
        f"{DEVICE} looks healthy but is held out for flapping "
        "(3 unhealthy spells within 60 s; flap_threshold 3)"
    )
    assert "if it stays clean for 30 s (flap_hold)" in said.getMessage()


async def test_fault_configuration_changes_are_not_the_chip_flapping(
    any_fake: ScenarioPlayer[Any], watched: Monitored
) -> None:
    """A code that one configuration makes a fault and the next does not: the chip did not change."""
    assert await _poll(watched, any_fake, fault_codes=["80E21007"])  # NotHandleFault: healthy
    for _ in range(4):
        watched.faults.set_overlay({0x80E21007: FaultLevel.SeparateNPU}, "a test's fault_levels.json")
        assert not await _poll(watched, any_fake, fault_codes=["80E21007"])
        watched.clock.advance(1)
        watched.faults.set_overlay({}, None)
        assert await _poll(watched, any_fake, fault_codes=["80E21007"]), watched.device(DEVICE).reason
        watched.clock.advance(1)
    # The chip's own flapping still counts, the configuration's changes never did.
    for _ in range(3):
        assert not await _poll(watched, any_fake, fault_codes=["80818C00"])
        watched.clock.advance(1)
        await _poll(watched, any_fake, fault_codes=[])
    assert watched.device(DEVICE).reason.startswith("flapping (3 unhealthy spells")
