"""``/metrics`` shows the fault policy's view: each chip's level and network level, and the escalations.

A running plugin on the Python fake, with an operator's file in the plugin's
format: ``A0000001`` at ManuallySeparateNPU (a FaultFrequency rule of one
occurrence: its first poll escalates the chip), and the link-down code
``81078603`` at SeparateNPU (for a network code, the network's level). Chip 1's
``dcmi_get_device_network_health`` answers FAULT, which counts as that code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"


async def test_levels_network_levels_and_escalations_are_on_metrics(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, tmp_path: Path
) -> None:
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps({"ManuallySeparateNPU": ["A0000001"], "SeparateNPU": ["81078603"]}))
    node.write(
        {
            "chip_name": "910B3",
            "chips": [
                {"phy_id": 0, "card_id": 1, "fault_codes": ["A0000001"]},
                {"phy_id": 1, "card_id": 2, "telemetry": {"network_health": 5}},
                {"phy_id": 2, "card_id": 3},
            ],
        }
    )
    settings = node.settings(plugin_dir, fault_levels_file=levels, health_interval=0.05)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        network = 'ascend_device_network_fault_level{device="Ascend910-1",level="SeparateNPU"} 8.0'
        await until(lambda: network in app.metrics.render().decode(), "chip 1's link down on /metrics")
        text = app.metrics.render().decode()
    assert 'ascend_device_fault_level{device="Ascend910-0",level="ManuallySeparateNPU"} 9.0' in text
    assert 'ascend_device_fault_level{device="Ascend910-1",level="NormalNPU"} 0.0' in text
    assert 'ascend_device_network_fault_level{device="Ascend910-2",level="NormalNPU"} 0.0' in text
    assert 'ascend_fault_escalations_total{upgrade_type="FaultFrequency"} 1.0' in text
    assert 'ascend_device_healthy{device="Ascend910-1"} 1.0' in text  # the network's level is apart
