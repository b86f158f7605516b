"""Helpers to drive a real plugin in tests: settings, a running PluginApp, waiting on the kubelet.

The plugin runs in-process (same event loop as the test); the kubelet stand-in
runs on grpcio's threads, so waiting on it goes through a worker thread and
never blocks the loop the plugin needs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fake_dcmi.players import CFakePlayer, ScenarioPlayer

from ascend_plugin.app import PluginApp
from ascend_plugin.settings import Settings
from ascend_plugin.testing.kubelet_standin import KubeletStandIn


@dataclass
class FakeNode:
    """A scenario file for the fake backend and a fake host root for device nodes."""

    scenario: Path
    host_root: Path

    def write(self, scenario: dict[str, Any]) -> None:
        """Replace the scenario atomically (the plugin never reads half a file)."""
        temporary = self.scenario.with_suffix(".tmp")
        temporary.write_text(json.dumps(scenario), encoding="utf-8")
        temporary.replace(self.scenario)

    def add_host_paths(self, *paths: str) -> None:
        """Make ``paths`` exist under the host root (device nodes are plain files here)."""
        for path in paths:
            target = self.host_root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()

    def settings(self, plugin_dir: Path, **overrides: Any) -> Settings:
        """Settings for a plugin on this node's Python fake, fast intervals, no HTTP endpoint."""
        return fast_settings(
            plugin_dir, self.host_root, backend="fake", fake_scenario=self.scenario, **overrides
        )


def fast_settings(plugin_dir: Path, host_root: Path, **overrides: Any) -> Settings:
    """Settings for a plugin under test: fast intervals, device mode, no HTTP endpoint, no kube side."""
    values: dict[str, Any] = {
        "device_plugin_path": plugin_dir,
        "host_root": host_root,
        "health_interval": 0.05,
        "kubelet_watch_interval": 0.02,
        "allocate_mode": "device",
        "http_address": "",
        "telemetry": False,  # the telemetry tests turn it on; the others keep their calls to themselves
        "node_name": None,
    }
    values.update(overrides)
    return Settings(**values)


def player_settings(
    player: ScenarioPlayer[Any], plugin_dir: Path, host_root: Path, **overrides: Any
) -> Settings:
    """Settings for a plugin on whichever fake ``player`` plays: the Python fake or the C libdcmi.so."""
    if isinstance(player, CFakePlayer):
        backend: dict[str, Any] = {
            "backend": "dcmi",
            "dcmi_library": player.current_library(),
            "dcmi_allow_untrusted_library": True,
        }
    else:
        backend = {"backend": "fake", "fake_scenario": player.scenario_path}
    return fast_settings(plugin_dir, host_root, **backend, **overrides)


@asynccontextmanager
async def running_plugin(settings: Settings, **options: Any) -> AsyncIterator[PluginApp]:
    """A PluginApp (with ``options``) running in the background for the duration of the block."""
    app = PluginApp(settings, **options)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        try:
            yield app
        finally:
            app.stop()


def not_ready_with(app: PluginApp, *words: str) -> bool:
    """Condition: /readyz answers not ready, and its text has every one of ``words``."""
    probe = app.readiness()
    return not probe.ok and all(word in probe.detail for word in words)


def health_of(resource: str, device: str) -> Callable[[KubeletStandIn], str | None]:
    """A reader of one device's health as the kubelet last saw it."""
    return lambda kubelet: kubelet.health(resource).get(device)


def registered(resource: str, times: int = 1) -> Callable[[KubeletStandIn], bool]:
    """Condition: ``resource`` registered at least ``times`` times and its devices listed."""

    def condition(kubelet: KubeletStandIn) -> bool:
        count = sum(1 for r in kubelet.registrations if r.resource_name == resource)
        view = kubelet.resources.get(resource)
        return count >= times and view is not None and view.updates > 0 and view.stream_open

    return condition
