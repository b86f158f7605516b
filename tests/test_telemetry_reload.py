"""Telemetry intervals change at run time, like the health knobs: the next figure follows the new one.

An operator who slowed telemetry down (or sped it up to watch a job) through
the config ConfigMap or a SIGHUP gets the new cadence without a restart: a
figure last read under a one-hour interval is due one new interval after that
read, so a value the driver changed meanwhile reaches /metrics.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from log_records import records
from plugin_harness import registered, running_plugin
from split_nodes import box_910b3, make_host, with_chip
from telemetry_harness import scrape_until, telemetry_settings, value
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


async def test_a_shorter_interval_applies_without_a_restart(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario = box_910b3({})
    c_fake.update(with_chip(scenario, 1, telemetry={"temperature_c": 40}))
    settings = telemetry_settings(c_fake, plugin_dir, host, telemetry_interval=3600)
    caplog.set_level(logging.INFO, logger="ascend_plugin.telemetry")
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await scrape_until(
            app, lambda found: value(found, "npu_chip_info_temperature", id="1") == 40, "the first read"
        )
        c_fake.update(with_chip(scenario, 1, telemetry={"temperature_c": 71}))
        assert app.config.apply({"telemetry_interval": 1}) == ["telemetry_interval"]
        await scrape_until(
            app, lambda found: value(found, "npu_chip_info_temperature", id="1") == 71, "the new interval"
        )
    [said] = [r for r in records(caplog, "ascend_plugin.telemetry.collector") if hasattr(r, "interval")]
    assert said.__dict__["interval"] == 1
