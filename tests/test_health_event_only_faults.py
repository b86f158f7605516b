"""A fault that arrives only as an event is acted on: raised holds, recovered releases, one-off expires.

The driver may deliver a fault event whose code ``dcmi_get_device_errorcode_v2``
never lists. Such a code stays on the chip until its recovery event, or, once
a poll has listed it, until a poll no longer does; a one-off event holds the
chip for its level's hold time (the fault policy's rules:
tests/test_fault_levels_and_health.py). Polls here are an hour apart: only the
events can bring news.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
HEALTH = health_of(RESOURCE, "Ascend910-2")


def _server(events: list[dict[str, Any]], fault_codes: tuple[str, ...] = ()) -> FakeScenario:
    chips = [
        {
            "phy_id": n,
            "card_id": n + 1,
            "events": events if n == 2 else [],
            "fault_codes": list(fault_codes) if n == 2 else [],
        }
        for n in range(4)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


@asynccontextmanager
async def subscribed(
    kubelet: KubeletStandIn, node: ScenarioPlayer[Any], plugin_dir: Path, host_root: Path
) -> AsyncIterator[PluginApp]:
    node.update(_server([]))
    async with running_plugin(player_settings(node, plugin_dir, host_root, health_interval=3600)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.monitor is not None and app.monitor.subscribed, "subscription")
        yield app


async def test_a_raised_event_alone_makes_the_chip_unhealthy_until_its_recovery_event(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    async with subscribed(kubelet, any_fake, plugin_dir, short_tmp) as app:
        raised = {"serial": 1, "code": "80E01801", "severity": 2, "assertion": 1}
        any_fake.update(_server([raised]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy from the event alone")
        assert app.inventory is not None
        assert app.inventory.chips()[2].health.reason == "fault 80E01801:RestartBusiness (event)"
        assert kubelet.health(RESOURCE)["Ascend910-1"] == "Healthy"
        recovered = {"serial": 2, "code": "80E01801", "severity": 2, "assertion": 0}
        any_fake.update(_server([raised, recovered]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy from the recovery event")


async def test_a_raised_event_clears_when_a_later_poll_no_longer_lists_its_code(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    # The driver lists the code for a while, then stops listing it, without a recovery event.
    async with subscribed(kubelet, any_fake, plugin_dir, short_tmp) as app:
        raised = {"serial": 1, "code": "80E01801", "severity": 2, "assertion": 1}
        any_fake.update(_server([raised], fault_codes=("80E01801",)))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy")
        inventory, monitor = app.inventory, app.monitor
        assert inventory is not None
        assert monitor is not None
        polled = "fault 80E01801:RestartBusiness"
        await until(lambda: inventory.chips()[2].health.reason == polled, "polled too")
        any_fake.update(_server([raised]))  # the code is gone from the poll; no event says so
        monitor.wake()  # the next poll (an hour away otherwise)
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy once the poll agrees")


async def test_event_codes_and_polled_codes_are_named_with_their_source(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    async with subscribed(kubelet, any_fake, plugin_dir, short_tmp) as app:
        raised = {"serial": 1, "code": "80E01801", "severity": 2, "assertion": 1}
        any_fake.update(_server([raised], fault_codes=("40F84E00",)))
        inventory = app.inventory
        assert inventory is not None
        await until(
            lambda: (
                inventory.chips()[2].health.reason
                == "fault 40F84E00:RestartNPU, 80E01801:RestartBusiness (event)"
            ),
            "both faults named",
        )


def _one_chip(**chip: object) -> FakeScenario:
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0, **chip}]})


async def _subscribed_monitor(player: ScenarioPlayer[Any], watched: Monitored) -> None:
    await watched.monitor.poll_all()
    await watched.monitor.subscribe()
    assert watched.monitor.subscribed


async def test_a_one_off_event_holds_the_chip_for_its_level_then_lets_go(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_one_chip())) as watched:
        await _subscribed_monitor(any_fake, watched)
        one_off = {"serial": 5, "code": "80E01801", "severity": 2, "assertion": 2}
        any_fake.update(_one_chip(events=[one_off]))
        await until(lambda: not watched.device("Ascend910-0").healthy, "held by the one-off event")
        hold = FaultLevel.RestartBusiness.one_off_hold
        watched.clock.advance(hold - 1)
        await watched.monitor.poll_all()
        assert not watched.device("Ascend910-0").healthy
        watched.clock.advance(1)
        await watched.monitor.poll_all()
        assert watched.device("Ascend910-0").healthy


async def test_an_event_only_code_is_not_lifted_by_polls_that_never_listed_it(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_one_chip())) as watched:
        await _subscribed_monitor(any_fake, watched)
        raised = {"serial": 1, "code": "80E01801", "severity": 2, "assertion": 1}
        any_fake.update(_one_chip(events=[raised]))
        await until(lambda: not watched.device("Ascend910-0").healthy, "unhealthy from the event")
        for _ in range(3):
            watched.clock.advance(60)
            await watched.monitor.poll_all()
            assert not watched.device("Ascend910-0").healthy, "a poll that never listed it lifted it"
