"""Fault events are the 910 families' own: their backend subscribes; other families' chips are polled."""

from __future__ import annotations

from typing import Any, cast

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored
from node_harness import CallCounter, backend_of

from backends.fake import FakeScenario
from backends.library import DeviceLibrary, FaultEvent

pytestmark = pytest.mark.anyio


def _ignore(event: FaultEvent) -> None:
    """A handler for events no test waits on."""


def _counted(player: ScenarioPlayer[Any], chip_name: str) -> CallCounter:
    return CallCounter(
        player.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    )


@pytest.mark.parametrize("chip_name", ["910A", "910B3", "Ascend910"])
def test_every_910_generation_subscribes(any_fake: ScenarioPlayer[Any], chip_name: str) -> None:
    counter = _counted(any_fake, chip_name)
    assert backend_of(cast(DeviceLibrary, counter)).subscribe_faults(_ignore)
    assert counter.calls["subscribe_faults"] == 1


@pytest.mark.parametrize("chip_name", ["310", "310B1", "310P3"])
def test_the_other_families_subscribe_to_nothing_and_ask_the_driver_nothing(
    any_fake: ScenarioPlayer[Any], chip_name: str
) -> None:
    counter = _counted(any_fake, chip_name)
    assert not backend_of(cast(DeviceLibrary, counter)).subscribe_faults(_ignore)
    assert counter.calls["subscribe_faults"] == 0


async def test_the_monitor_of_a_310p_node_polls_alone(any_fake: ScenarioPlayer[Any]) -> None:
    counter = _counted(any_fake, "310P3")
    with monitored(cast(DeviceLibrary, counter)) as watched:
        await watched.monitor.subscribe()
        assert not watched.monitor.subscribed
        await watched.monitor.poll_all()
        assert watched.device("Ascend310P-0").healthy
    assert counter.calls["subscribe_faults"] == 0
