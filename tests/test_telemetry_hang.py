"""A hung telemetry call on one chip: health goes on, the chip's figures go stale then absent, said once.

The C fake blocks chip 1's ``dcmi_get_device_temperature`` until the scenario
changes. The telemetry call gives its thread up after its own timeout; the
chip's lane is not stuck, so its health polls go on (a fault injected meanwhile
reaches the kubelet); its figures leave /metrics once stale; chip 0's stay;
when the call returns, the chip is read again. The health polls never wait for
the hung call, however long its own timeout.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from library_threads import inside_the_library
from log_records import records
from plugin_harness import health_of, registered, running_plugin
from split_nodes import FAULT, box_910b3, make_host, with_chip
from telemetry_harness import of, scrape_until, telemetry_settings
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


COLLECTOR = "ascend_plugin.telemetry.collector"


def not_read(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The lines saying a chip's telemetry is not read (they carry the problem)."""
    return [
        record for record in records(caplog, COLLECTOR, level=logging.WARNING) if hasattr(record, "problem")
    ]


async def test_a_hung_telemetry_call_leaves_health_alone_and_its_figures_go(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    healthy = box_910b3({})
    hung = with_chip(healthy, 1, hang=["temperature"])
    c_fake.update(healthy)
    settings = telemetry_settings(c_fake, plugin_dir, host, telemetry_call_timeout=0.2)
    caplog.set_level(logging.INFO, logger="ascend_plugin.telemetry")
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await scrape_until(app, lambda found: bool(of(found, "npu_chip_info_power", id="1")), "chip 1 read")
        c_fake.update(hung)
        await until(lambda: not_read(caplog), "the hung call said")
        # Stale first: the figures read before the hang are still shown.
        assert app.telemetry is not None
        [stale] = [sample for sample in app.telemetry.snapshot() if sample.state.phy_id == 1]
        assert stale.readout.power is not None
        [said] = not_read(caplog)
        assert said.__dict__["chip"] == 1
        assert "temperature did not return within 0.2 s" in said.__dict__["problem"]  # the call and the bound
        assert app.calls.stuck(1) is None  # the lane is not stuck: health calls go on
        # Health is polled as before: a fault on the hung chip reaches the kubelet.
        c_fake.update(with_chip(hung, 1, fault_codes=[FAULT]))
        await wait_for(
            kubelet, lambda k: health_of(RESOURCE, "Ascend910-1")(k) == "Unhealthy", "the fault seen"
        )
        # Chip 1's figures leave /metrics once stale (3 s); chip 0's stay.
        samples = await scrape_until(
            app,
            lambda found: (
                not [s for s in found if s.name.startswith("npu_chip_info") and s.labels["id"] == "1"]
            ),
            "chip 1's figures gone",
        )
        assert of(samples, "npu_chip_info_power", id="0")
        assert of(samples, "npu_chip_info_temperature", id="0")
        assert len(not_read(caplog)) == 1  # said once, however many rounds refused it
        # The call returns: the chip is read again, and said so.
        c_fake.update(healthy)
        await scrape_until(
            app, lambda found: bool(of(found, "npu_chip_info_temperature", id="1")), "chip 1 read again"
        )
        again = [
            record for record in records(caplog, COLLECTOR, level=logging.INFO) if hasattr(record, "after")
        ]
        assert [record.__dict__["chip"] for record in again] == [1]
        assert app.calls.abandoned_threads == 0


async def test_a_hung_telemetry_call_never_holds_up_its_chips_health_polls(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At the longest telemetry timeout (10 s), a fault during the hang is seen before the call is dropped.

    Fault events are off, so that only a health poll can see the fault.
    """
    healthy = FakeScenario.model_validate(box_910b3({}).model_dump(exclude_none=True) | {"subscribe": False})
    hung = with_chip(healthy, 1, hang=["temperature"])
    c_fake.update(healthy)
    settings = telemetry_settings(c_fake, plugin_dir, host, telemetry_call_timeout=10)
    caplog.set_level(logging.INFO, logger="ascend_plugin.telemetry")
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        c_fake.update(hung)
        await until(_temperature_of_chip_1_hangs, "chip 1's temperature read hangs")
        c_fake.update(with_chip(hung, 1, fault_codes=[FAULT]))
        await wait_for(
            kubelet, lambda k: health_of(RESOURCE, "Ascend910-1")(k) == "Unhealthy", "the fault seen"
        )
        assert not_read(caplog) == []  # the telemetry call is still within its 10 s: nothing waited for it
        assert _temperature_of_chip_1_hangs()
        assert app.calls.stuck(1) is None
        c_fake.update(healthy)
        await wait_for(
            kubelet, lambda k: health_of(RESOURCE, "Ascend910-1")(k) == "Healthy", "the fault gone"
        )


def _temperature_of_chip_1_hangs() -> bool:
    return any(
        inside_the_library(thread, "temperature")
        for thread in threading.enumerate()
        if thread.name.startswith("dcmi-chip1-")
    )
