"""A hung driver call on one chip of sixteen stalls that chip alone.

While chip 3's health call hangs, the other fifteen keep being polled at their
pace: faults and recoveries on them, and a card that drops off the bus, reach
the kubelet as they would without the hang; a kubelet restart during the hang
gets a first list with the stuck chip and the dropped card Unhealthy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from fake_dcmi.players import ScenarioPlayer
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
STUCK, FAULTY, RECOVERING, DROPPING = 3, 5, 9, 11


def _node(*, hang: bool, faults: dict[int, list[str]] | None = None, dropped: bool = False) -> FakeScenario:
    chips = []
    for phy in range(16):
        chip: dict[str, Any] = {"phy_id": phy, "card_id": 100 + phy}
        if phy == STUCK and hang:
            chip["hang"] = ["health"]
        if faults and phy in faults:
            chip["fault_codes"] = faults[phy]
        if phy == DROPPING and dropped:
            chip["errors"] = {"health": -8012}
        chips.append(chip)
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


def _is(device: int, health: str) -> Any:
    return lambda kubelet: health_of(RESOURCE, f"Ascend910-{device}")(kubelet) == health


async def test_one_hung_chip_of_sixteen_holds_up_no_other(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    any_fake.update(_node(hang=False, faults={RECOVERING: ["80E01801"]}))
    settings = player_settings(any_fake, plugin_dir, short_tmp, dcmi_call_timeout=1.0, health_interval=0.05)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await wait_for(kubelet, _is(RECOVERING, "Unhealthy"), "the faulty chip out")

        any_fake.update(_node(hang=True, faults={RECOVERING: ["80E01801"]}))
        await wait_for(kubelet, _is(STUCK, "Unhealthy"), "the hung chip out")
        inventory = app.inventory
        assert inventory is not None
        assert inventory.chips()[STUCK].health.reason == "driver call read_health did not return within 1 s"

        # During the hang: a new fault, a recovery and a card gone from the bus, each on another chip.
        any_fake.update(_node(hang=True, faults={FAULTY: ["80E01801"]}, dropped=True))
        await wait_for(kubelet, _is(FAULTY, "Unhealthy"), "a fault on another chip")
        await wait_for(kubelet, _is(RECOVERING, "Healthy"), "a recovery on another chip")
        await wait_for(kubelet, _is(DROPPING, "Unhealthy"), "a dropped card")
        others = {f"Ascend910-{phy}" for phy in range(16)} - {
            f"Ascend910-{phy}" for phy in (STUCK, FAULTY, DROPPING)
        }
        assert all(kubelet.health(RESOURCE)[device] == "Healthy" for device in others)
        stuck = app.calls.stuck(STUCK)
        assert stuck is not None
        assert [call.lane for call in app.calls.stuck_calls()] == [STUCK]
        assert app.ready  # a chip's hang is the chip's problem, not the plugin's
        assert f"driver call read_health on chip {STUCK} stuck for" in app.readiness().detail
        # Bounded: one thread is stuck in the library, not one per poll.
        assert app.calls.abandoned_threads <= 2

        # A kubelet restart during the hang: its first list is the truth, stuck chip included.
        before = len(kubelet.registrations)
        await anyio.to_thread.run_sync(kubelet.restart)
        await wait_for(kubelet, lambda k: len(k.registrations) > before and registered(RESOURCE)(k), "back")
        first = kubelet.health(RESOURCE)
        assert first[f"Ascend910-{STUCK}"] == "Unhealthy"
        assert first[f"Ascend910-{DROPPING}"] == "Unhealthy"
        assert first[f"Ascend910-{FAULTY}"] == "Unhealthy"

        # The call comes back: the chip recovers by the normal path.
        any_fake.update(_node(hang=False))
        await wait_for(kubelet, _is(STUCK, "Healthy"), "the stuck chip back")
        await until(lambda: app.calls.stuck(STUCK) is None, "its lane free")
        await until(lambda: app.calls.abandoned_threads == 0, "no thread left in the library")


async def test_a_chip_stuck_at_start_is_listed_unhealthy_from_the_first_answer(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    any_fake.update(_node(hang=True))
    settings = player_settings(any_fake, plugin_dir, short_tmp, dcmi_call_timeout=0.2)
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        view = kubelet.resources[RESOURCE]
        assert view.updates >= 1
        assert kubelet.health(RESOURCE)[f"Ascend910-{STUCK}"] == "Unhealthy"
        assert kubelet.health(RESOURCE)["Ascend910-0"] == "Healthy"
        any_fake.update(_node(hang=False))
        await wait_for(kubelet, _is(STUCK, "Healthy"), "the chip answers again")


async def test_a_hung_node_wide_call_makes_the_plugin_not_ready_and_leaves_the_chips_alone(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    # The fault subscription (a node-wide call) hangs; the chips, already known, keep being polled.
    node = _node(hang=False).model_copy(update={"hang": ("subscribe_faults",)})
    any_fake.update(node)
    settings = player_settings(any_fake, plugin_dir, short_tmp, dcmi_call_timeout=1.0, health_interval=0.05)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.calls.stuck(None) is not None, "the node lane stuck")
        assert not app.ready
        assert app.readiness().detail.startswith("driver call dcmi_subscribe_fault_event on node stuck for")
        any_fake.update(
            _node(hang=False, faults={FAULTY: ["80E01801"]}).model_copy(
                update={"hang": ("subscribe_faults",)}
            )
        )
        await wait_for(kubelet, _is(FAULTY, "Unhealthy"), "a fault still seen by polling")
        assert all(
            kubelet.health(RESOURCE)[f"Ascend910-{phy}"] == "Healthy" for phy in range(16) if phy != FAULTY
        )
        any_fake.update(_node(hang=False))
        await until(lambda: app.calls.stuck(None) is None, "the node lane free again")
        await until(lambda: app.ready, "ready again")
