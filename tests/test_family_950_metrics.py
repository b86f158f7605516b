"""/metrics on a 950 node: npu-exporter's A5 figures, each under its chip's physical id.

The C fake plays the Atlas 850 through DCMI v2 (logical ids four off the
physical ones), each chip with its own temperature and power: a figure read
for the wrong id would show under another chip's ``id``. Its driver lacks the
period utilization call, so the instant multi-rate call gives the four
utilization figures; HBM and its ECC counters, the network status (DCMI's, as
npu-exporter reads it on an Atlas 850) are shown, and npu-exporter's node
gauges without ``machine_card_nums`` (DCMI v2 has no cards).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from node_950 import CHIPS, RESOURCE, host, node_950
from plugin_harness import registered, running_plugin
from telemetry_harness import CARD_LABELS, of, on_every_chip, scrape_until, telemetry_settings, value
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


async def test_the_a5_figures_under_each_chips_physical_id(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    telemetry = {
        "utilization_pct": {"aicore": 35, "vectorcore": 20, "aicube": 30, "npu": 40, "hbm": 55},
        "memory_used_mb": 30000,
    }
    own = {phy: {"telemetry": {"temperature_c": 40 + phy, "power_w": 100.0 + phy}} for phy in range(CHIPS)}
    own[2] = own[2] | {"health": 1, "fault_codes": ["80CB8009"]}  # a minor alarm: unhealthy to npu-exporter
    c_fake.update(node_950(own, telemetry=telemetry))
    settings = telemetry_settings(c_fake, plugin_dir, host(short_tmp / "host"))
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        samples = await scrape_until(app, on_every_chip(app, "npu_chip_info_hbm_used_memory"), "HBM figures")
    for phy in range(CHIPS):
        assert value(samples, "npu_chip_info_temperature", id=str(phy)) == 40 + phy
        assert value(samples, "npu_chip_info_power", id=str(phy)) == pytest.approx(100.0 + phy)
    [temperature] = of(samples, "npu_chip_info_temperature", id="0")
    assert set(temperature.labels) == set(CARD_LABELS)
    assert temperature.labels["model_name"] == "Ascend950PR-Ascend-V1"
    assert temperature.labels["vdie_id"] == ""  # the 950 answers no VDIE (npu-exporter's label is empty too)
    assert value(samples, "npu_chip_info_utilization", id="3") == 35
    assert value(samples, "npu_chip_info_vector_utilization", id="3") == 20
    assert value(samples, "npu_chip_info_cube_utilization", id="3") == 30
    assert value(samples, "npu_chip_info_overall_utilization", id="3") == 40
    assert value(samples, "npu_chip_info_hbm_total_memory", id="5") == 131072
    assert value(samples, "npu_chip_info_hbm_used_memory", id="5") == 30000
    assert value(samples, "npu_chip_info_hbm_utilization", id="5") == 55
    assert value(samples, "npu_chip_info_network_status", id="5") == 1
    assert value(samples, "npu_chip_info_hbm_ecc_enable_flag", id="5") is not None
    assert value(samples, "npu_chip_info_error_code", id="2") == 0x80CB8009
    assert value(samples, "npu_chip_info_health_status", id="2") == 0
    assert of(samples, "npu_chip_info_used_memory") == []  # no DDR
    assert value(samples, "machine_npu_nums") == CHIPS
    assert value(samples, "machine_healthy_npu_nums") == CHIPS - 1
    assert value(samples, "machine_unhealthy_npu_nums") == 1
    assert value(samples, "machine_unknown_npu_nums") == 0
    assert of(samples, "machine_card_nums") == []
