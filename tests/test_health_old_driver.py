"""An older libdcmi.so, without the optional functions, is served: health from what the driver has.

A driver without ``dcmi_get_device_errorcode_v2`` or ``dcmi_subscribe_fault_event``
must never take the plugin down (it used to: SymbolMissing escaped the first
poll). The plugin says once which functions are missing and what it does
instead, and judges health from the health value alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from log_records import records
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
HEALTH = health_of(RESOURCE, "Ascend910-1")


def _old_driver(missing: list[str], health: int = 0) -> FakeScenario:
    chips = [{"phy_id": 0}, {"phy_id": 1, "health": health, "fault_codes": ["80E01801"] if health else []}]
    return FakeScenario.model_validate({"chip_name": "910B3", "missing": missing, "chips": chips})


@pytest.mark.parametrize(
    ("missing", "functions"),
    [
        (["error_codes"], ["dcmi_get_device_errorcode_v2"]),
        (["subscribe_faults"], ["dcmi_subscribe_fault_event"]),
        (["error_codes", "subscribe_faults"], ["dcmi_get_device_errorcode_v2", "dcmi_subscribe_fault_event"]),
        (["pcie_address"], ["dcmi_get_device_pcie_info_v2"]),
        (["device_ip"], ["dcmi_get_device_ip"]),
    ],
)
async def test_a_driver_missing_optional_functions_is_served_and_says_so_once(
    kubelet: KubeletStandIn,
    any_fake: ScenarioPlayer[Any],
    plugin_dir: Path,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
    missing: list[str],
    functions: list[str],
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin")
    any_fake.update(_old_driver(missing))
    async with running_plugin(player_settings(any_fake, plugin_dir, short_tmp)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert kubelet.health(RESOURCE) == {"Ascend910-0": "Healthy", "Ascend910-1": "Healthy"}
        for function in functions:
            said = records(caplog, "ascend_plugin.inventory.discovery", function=function)
            assert [record.levelno for record in said] == [logging.WARNING], function
        assert app.inventory is not None
        assert set(functions) <= app.inventory.facts.missing_functions
        if "subscribe_faults" in missing:
            assert app.monitor is not None
            assert not app.monitor.subscribed


async def test_without_error_codes_the_health_value_decides(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    any_fake.update(_old_driver(["error_codes", "subscribe_faults"]))
    async with running_plugin(player_settings(any_fake, plugin_dir, short_tmp)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        any_fake.update(_old_driver(["error_codes", "subscribe_faults"], health=3))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy by the health value")
        inventory = app.inventory
        assert inventory is not None
        # The fault code is there, but this driver cannot tell: the value is all there is.
        assert inventory.chips()[1].health.reason == "health value 3 (critical alarm) without a fault code"
        any_fake.update(_old_driver(["error_codes", "subscribe_faults"], health=0))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy again")
        await until(lambda: app.ready, "ready")
