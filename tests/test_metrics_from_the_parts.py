"""The metrics of a running plugin, each read from the part that keeps it: chips, kubelet face, readiness."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def test_before_the_chips_are_found_there_is_nothing_to_count(node: FakeNode, plugin_dir: Path) -> None:
    app = PluginApp(node.settings(plugin_dir))
    source = app.metrics_source
    assert source.chip_metrics() == []
    assert source.kubelet() == KubeletCounters()
    assert not source.ready()
    assert "ascend_plugin_ready 0.0" in app.metrics.render().decode()


async def test_the_face_serving_the_kubelet_feeds_its_counters(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    node.write({"chip_name": "310B1", "chips": [{"phy_id": 0}, {"phy_id": 1, "fault_codes": ["80E01801"]}]})
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.ready, "ready")
        await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
        for refused in (["Ascend310-7"], ["Ascend310-1"]):
            with pytest.raises(grpc.RpcError):
                await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, refused)
        assert app.face is not None
        assert app.metrics_source.kubelet() == app.face.counters()
        text = app.metrics.render().decode()
    assert "ascend_allocations_total 1.0" in text
    assert 'ascend_allocation_errors_total{reason="unknown"} 1.0' in text
    assert 'ascend_allocation_errors_total{reason="unhealthy"} 1.0' in text
    assert "ascend_kubelet_registrations_total 1.0" in text
    assert 'ascend_device_healthy{device="Ascend310-0"} 1.0' in text
    assert 'ascend_device_healthy{device="Ascend310-1"} 0.0' in text
    assert "ascend_plugin_ready 1.0" in text
