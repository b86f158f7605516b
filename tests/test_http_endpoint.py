"""/healthz, /readyz and /metrics: probes explain themselves, metrics follow device health."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import anyio.to_thread
import pytest
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def _get(app: PluginApp, path: str) -> tuple[int, str]:
    assert app.http is not None
    url = f"http://127.0.0.1:{app.http.port}{path}"

    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    return await anyio.to_thread.run_sync(fetch)


async def _serving(app: PluginApp) -> None:
    await until(lambda: app.http is not None and app.http.port != 0, "endpoint listening")


async def test_metrics_follow_a_fault_injection(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir, http_address="127.0.0.1:0")) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await _serving(app)
        await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310-0"])
        status, before = await _get(app, "/metrics")
        assert status == 200
        assert 'ascend_device_healthy{device="Ascend310-0"} 1.0' in before
        assert 'ascend_device_ai_cores{device="Ascend310-0"} 1.0' in before
        assert "ascend_allocations_total 1.0" in before
        assert "ascend_kubelet_registrations_total 1.0" in before
        assert 'ascend_dcmi_call_seconds_count{function="read_health"}' in before
        assert "ascend_dcmi_abandoned_threads 0.0" in before

        node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "fault_codes": ["80E01801"]}]})
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", "unhealthy")
        _, after = await _get(app, "/metrics")
        assert 'ascend_device_healthy{device="Ascend310-0"} 0.0' in after
        assert 'ascend_device_fault_level{device="Ascend310-0",level="RestartBusiness"} 4.0' in after


async def test_probes_say_why_not_ready(node: FakeNode, plugin_dir: Path) -> None:
    # No kubelet: alive, but not ready, and the answer says why.
    async with running_plugin(node.settings(plugin_dir, http_address="127.0.0.1:0")) as app:
        await _serving(app)
        assert await _get(app, "/healthz") == (200, "ok\n")
        status, detail = await _get(app, "/readyz")
        assert status == 503
        assert detail.startswith(("device plugin: ", "chips not available"))
        kubelet = KubeletStandIn(plugin_dir)
        kubelet.start()
        try:
            await wait_for(kubelet, registered(RESOURCE), "registration")
            await until(lambda: app.ready, "ready")
            assert await _get(app, "/readyz") == (200, "ready: 1 of 1 chips healthy\n")
        finally:
            kubelet.stop()


async def test_unknown_paths_and_methods(node: FakeNode, plugin_dir: Path) -> None:
    async with running_plugin(node.settings(plugin_dir, http_address="127.0.0.1:0")) as app:
        await _serving(app)
        status, body = await _get(app, "/nope")
        assert status == 404
        assert "/healthz" in body
