"""A health-transition listener that raises stops nothing: the change is counted, the others are told."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kube_harness import make_inventory
from log_records import records
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.inventory.inventory import ChipState
from ascend_plugin.inventory.verdict import Verdict
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
UNHEALTHY = Verdict(known=True, healthy=False, reason="fault 80E01801")


def failing(old: ChipState, new: ChipState) -> None:
    raise RuntimeError("a listener's own bug")


def test_the_version_moves_and_every_listener_is_told(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inventory = make_inventory(short_tmp)
    told: list[bool] = []
    inventory.on_transition(failing)
    inventory.on_transition(lambda old, new: told.append(new.healthy))
    version = inventory.version
    assert inventory.set_health(0, UNHEALTHY)
    assert inventory.version > version
    assert told == [False]
    assert inventory.set_resetting([0], True)  # a reset flips nothing here (already unhealthy)
    inventory.set_health(0, Verdict(known=True, healthy=True, reason=""))
    inventory.set_resetting([0], False)  # back from the reset: healthy again, a flip
    assert told == [False, True]
    (logged,) = records(caplog, "ascend_plugin.inventory.inventory", level=logging.ERROR)[:1]
    assert logged.exc_info is not None


async def test_the_kubelet_hears_of_a_change_a_failing_listener_saw(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        inventory = await until(lambda: app.inventory, "the chips found")
        inventory.on_transition(failing)
        node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "fault_codes": ["80E01801"]}]})
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", "unhealthy")
