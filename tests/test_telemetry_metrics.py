"""Chip telemetry on /metrics under npu-exporter's names, units and labels, per family, on the real binding.

The plugin runs on the C fake libdcmi.so, whose scenario sets each figure in an
operator's units and answers in DCMI's (0.1 W, 0.01 V); what a family's driver
does not report (HBM on 310P, DDR on 910B) is not emitted, nor anything of a
function the driver lacks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import registered, running_plugin
from split_nodes import box_910b3, duo, make_host
from telemetry_harness import (
    CARD_LABELS,
    Sample,
    of,
    on_every_chip,
    scrape,
    scrape_until,
    telemetry_settings,
    value,
)
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

VDIE = re.compile(r"^[0-9A-F]{8}(-[0-9A-F]{8}){4}$")
PCIE = re.compile(r"^[0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]$")


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1", "/dev/vdavinci100")


def b3_box() -> FakeScenario:
    """Two 910B3 chips, whole; chip 1 hotter, busier and with a fault code."""
    data = box_910b3({}).model_dump(exclude_none=True)
    data["telemetry"] = {
        "temperature_c": 52,
        "power_w": 312.5,
        "voltage_v": 0.87,
        "frequency_mhz": {"aicore_current": 1650},
        "utilization_pct": {"aicore": 35, "vectorcore": 20, "aicube": 30, "npu": 40, "hbm": 55},
        "memory_used_mb": 30000,
        "hbm_temperature_c": 47,
        "hbm_bandwidth_pct": 12,
    }
    data["chips"][1]["telemetry"] = {"temperature_c": 66, "utilization_pct": {"aicore": 90}}
    data["chips"][1]["fault_codes"] = ["80E01801", "80C98008"]
    return FakeScenario.model_validate(data)


async def metrics_once_read(app: PluginApp, needed: str) -> list[Sample]:
    """The first scrape in which every chip has ``needed``."""
    await until(lambda: app.inventory is not None, "the chips found")
    return await scrape_until(app, on_every_chip(app, needed), f"every chip's {needed} on /metrics")


async def test_a_910b3_box_shows_npu_exporters_figures_with_its_units_and_labels(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(b3_box())
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        samples = await metrics_once_read(app, "npu_chip_info_hbm_used_memory")
    assert value(samples, "machine_npu_nums") == 2
    [temperature0] = of(samples, "npu_chip_info_temperature", id="0")
    assert set(temperature0.labels) == set(CARD_LABELS)
    labels = temperature0.labels
    assert labels["model_name"] == "910B3-Ascend-V1"
    assert VDIE.match(labels["vdie_id"]), labels
    assert labels["pcie_bus_info"] == "" or PCIE.match(labels["pcie_bus_info"]), labels
    assert (labels["namespace"], labels["pod_name"], labels["container_name"]) == ("", "", "")
    assert temperature0.value == 52
    assert value(samples, "npu_chip_info_temperature", id="1") == 66
    assert value(samples, "npu_chip_info_power", id="0") == pytest.approx(312.5)  # W, from 3125 x 0.1 W
    assert value(samples, "npu_chip_info_voltage", id="0") == pytest.approx(0.87)  # V, from 87 x 0.01 V
    assert value(samples, "npu_chip_info_aicore_current_freq", id="0") == 1650
    # 910B: the multi-rate call's four figures.
    assert value(samples, "npu_chip_info_utilization", id="1") == 90
    assert value(samples, "npu_chip_info_vector_utilization", id="0") == 20
    assert value(samples, "npu_chip_info_cube_utilization", id="0") == 30
    assert value(samples, "npu_chip_info_overall_utilization", id="0") == 40
    # HBM (MB), its utilization, temperature and bandwidth; no DDR figures on a 910B.
    assert value(samples, "npu_chip_info_hbm_used_memory", id="0") == 30000
    assert value(samples, "npu_chip_info_hbm_total_memory", id="0") == 65536
    assert value(samples, "npu_chip_info_hbm_utilization", id="0") == 55
    assert value(samples, "npu_chip_info_hbm_temperature", id="0") == 47
    assert value(samples, "npu_chip_info_hbm_bandwidth_utilization", id="0") == 12
    assert of(samples, "npu_chip_info_used_memory") == []
    assert of(samples, "npu_chip_info_total_memory") == []
    # Health and the error codes as decimals.
    assert value(samples, "npu_chip_info_health_status", id="0") == 1
    assert value(samples, "npu_chip_info_error_code", id="0") == 0
    assert value(samples, "npu_chip_info_error_code", id="1") == 0x80E01801
    assert value(samples, "npu_chip_info_error_code_1", id="1") == 0x80C98008
    assert of(samples, "npu_chip_info_error_code_2") == []
    # A training card's RoCE port, and the HBM's ECC counters.
    assert value(samples, "npu_chip_info_network_status", id="0") == 1
    assert value(samples, "npu_chip_info_hbm_ecc_enable_flag", id="0") == 1
    assert value(samples, "npu_chip_info_hbm_ecc_double_bit_error_cnt", id="0") == 0


async def test_a_300i_duo_shows_the_cards_power_its_ddr_and_its_vnpus(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    data = duo({0: [{"vdev_id": 100, "template": "vir02", "memory_mb": 6144}]}).model_dump(exclude_none=True)
    data["telemetry"] = {"power_w": 20.0, "memory_used_mb": 4096, "utilization_pct": {"aicore": 15}}
    data["chips"][0]["vdev_usage"] = {"100": {"aicore_utilization": 60, "memory_used_mb": 1024}}
    c_fake.update(FakeScenario.model_validate(data))
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "registration")
        samples = await metrics_once_read(app, "npu_chip_info_used_memory")
    # 310P: the card's power, read by its MCU (both chips' 20 W), on each chip.
    assert value(samples, "npu_chip_info_power", id="0") == pytest.approx(40.0)
    assert value(samples, "npu_chip_info_power", id="1") == pytest.approx(40.0)
    assert value(samples, "npu_chip_info_used_memory", id="1") == 4096
    assert value(samples, "npu_chip_info_total_memory", id="1") == 24576
    assert value(samples, "npu_chip_info_utilization", id="1") == 15
    for name in (
        "npu_chip_info_hbm_used_memory",
        "npu_chip_info_network_status",
        "npu_chip_info_cube_utilization",
    ):
        assert of(samples, name) == [], name
    [vnpu] = of(samples, "vnpu_pod_aicore_utilization")
    assert vnpu.value == 60
    assert vnpu.labels == {
        "id": "0",
        "model_name": "310P3-Ascend-V1",
        "v_dev_id": "100",
        "aicore_count": "2",
        "namespace": "",
        "pod_name": "",
        "container_name": "",
        "is_virtual": "true",
    }
    total = value(samples, "vnpu_pod_total_memory", id="0")
    used = value(samples, "vnpu_pod_used_memory", id="0")
    assert total is not None
    assert used is not None
    assert (total, used) == (6144 * 1024, 1024 * 1024)  # KB


@pytest.mark.parametrize("c_fake", [("dcmi_get_device_temperature",)], indirect=True)
async def test_a_function_the_driver_lacks_is_not_emitted(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(b3_box())
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        samples = await metrics_once_read(app, "npu_chip_info_power")
    assert of(samples, "npu_chip_info_temperature") == []
    assert value(samples, "npu_chip_info_voltage", id="1") == pytest.approx(0.87)


async def test_telemetry_off_shows_none_of_it(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(b3_box())
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host, telemetry=False)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        await until(lambda: app.http is not None and app.http.port != 0, "endpoint listening")
        samples = await scrape(app)
    assert of(samples, "ascend_device_healthy")
    assert [s for s in samples if s.name.startswith(("npu_", "machine_npu", "container_npu", "vnpu_"))] == []
