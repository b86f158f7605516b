"""npu-exporter's node gauges: machine_npu_nums, machine_card_nums and the healthy/unhealthy/unknown counts.

As npu-exporter computes them (August 2026): a chip is healthy when
``dcmi_get_device_health`` answers 0, unhealthy for any other answer (a minor
alarm too), unknown when the call fails, the card dropped off the bus, or it has
not been read yet; the three add up to ``machine_npu_nums``. ``machine_card_nums``
(the DCMI cards) is shown for 310P and the 910 generations, not for 310, 310B or 950.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import registered, running_plugin
from split_nodes import make_host
from telemetry_harness import of, on_every_chip, scrape_until, telemetry_settings, value
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio


async def test_the_health_counts_and_the_cards_of_a_910b_box(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    chips = [
        {"phy_id": 0, "card_id": 3},
        {"phy_id": 1, "card_id": 3, "health": 1},  # a minor alarm: unhealthy to npu-exporter
        {"phy_id": 2, "card_id": 5, "health": 3, "fault_codes": ["80E01801"]},
        {"phy_id": 3, "card_id": 6, "errors": {"health": -8012}},  # dropped off the bus: unknown
        {"phy_id": 4, "card_id": 6, "errors": {"health": -8005}},  # the call fails: unknown
    ]
    c_fake.update(FakeScenario.model_validate({"chip_name": "910B3", "chips": chips}))
    host = make_host(short_tmp / "host", *(f"/dev/davinci{phy}" for phy in range(5)))
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        samples = await scrape_until(app, on_every_chip(app, "npu_chip_info_health_status"), "health read")
    assert value(samples, "machine_npu_nums") == 5
    assert value(samples, "machine_healthy_npu_nums") == 1
    assert value(samples, "machine_unhealthy_npu_nums") == 2
    assert value(samples, "machine_unknown_npu_nums") == 2
    assert value(samples, "machine_card_nums") == 3
    for name in ("machine_healthy_npu_nums", "machine_card_nums"):
        [sample] = of(samples, name)
        assert sample.labels == {}


async def test_no_card_count_on_a_310_node(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    chips = [{"phy_id": phy, "card_id": 5} for phy in range(4)]
    c_fake.update(FakeScenario.model_validate({"chip_name": "310", "chips": chips}))
    host = make_host(short_tmp / "host", *(f"/dev/davinci{phy}" for phy in range(4)))
    async with running_plugin(telemetry_settings(c_fake, plugin_dir, host)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310"), "registration")
        samples = await scrape_until(app, on_every_chip(app, "npu_chip_info_health_status"), "health read")
    assert value(samples, "machine_healthy_npu_nums") == 4
    assert of(samples, "machine_card_nums") == []
