"""A restarted plugin run adds its listeners once: a run that failed before serving leaves none behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


def listeners(app: PluginApp) -> int:
    """The run-time configuration's listeners (the log level's, and the run's)."""
    return len(app.config._listeners)


async def test_a_run_that_failed_before_serving_leaves_no_listener_behind(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_plugin(node.settings(plugin_dir, telemetry=True)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        served_once = listeners(app)
    planned = PluginApp._device_plugin_tasks
    failures = []

    def fail_once(self: PluginApp, *args: Any) -> Any:
        if not failures:
            failures.append(1)
            raise RuntimeError("a part that could not be built, once")
        return planned(self, *args)

    monkeypatch.setattr(PluginApp, "_device_plugin_tasks", fail_once)
    async with running_plugin(node.settings(plugin_dir, telemetry=True)) as app:
        await wait_for(kubelet, registered(RESOURCE, 2), "registration after the restarted run")
        assert failures
        assert listeners(app) == served_once
