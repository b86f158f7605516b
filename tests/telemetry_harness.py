"""Helpers of the telemetry tests: a plugin with telemetry and its endpoint on; /metrics parsed."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from fake_dcmi.players import ScenarioPlayer
from plugin_harness import player_settings
from prometheus_client.parser import text_string_to_metric_families
from waiting import WAIT, until

from ascend_plugin.app import PluginApp
from ascend_plugin.settings import Settings

CARD_LABELS = ("id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")


@dataclass(frozen=True)
class Sample:
    """One series of a scrape: its name, labels and value."""

    name: str
    labels: dict[str, str]
    value: float


def telemetry_settings(
    player: ScenarioPlayer[Any], plugin_dir: Path, host: Path, **overrides: Any
) -> Settings:
    """A plugin on ``player``'s fake with telemetry on, read every second, and its endpoint on a free port."""
    values: dict[str, Any] = {
        "telemetry": True,
        "telemetry_interval": 1,
        "telemetry_slow_interval": 1,
        "http_address": "127.0.0.1:0",
    }
    values.update(overrides)
    return player_settings(player, plugin_dir, host, **values)


async def scrape(app: PluginApp) -> list[Sample]:
    """GET /metrics, parsed by prometheus_client's own parser."""
    assert app.http is not None
    assert app.http.port
    url = f"http://127.0.0.1:{app.http.port}/metrics"

    def fetch() -> str:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    text = await anyio.to_thread.run_sync(fetch)
    return [
        Sample(sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def of(samples: list[Sample], name: str, **labels: str) -> list[Sample]:
    """The samples named ``name`` whose labels include ``labels``."""
    return [s for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    """The one sample's value (None when there is none); AssertionError when there are several."""
    found = of(samples, name, **labels)
    assert len(found) <= 1, found
    return found[0].value if found else None


async def scrape_until(
    app: PluginApp, condition: Callable[[list[Sample]], bool], what: str, *, within: float = WAIT
) -> list[Sample]:
    """The first scrape whose samples satisfy ``condition``, scraping every 50 ms."""
    await until(lambda: app.http is not None and app.http.port != 0, "the endpoint listening")
    deadline = time.monotonic() + within
    while not condition(samples := await scrape(app)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within:g} s: {what}")
        await anyio.sleep(0.05)
    return samples


def on_every_chip(app: PluginApp, name: str) -> Callable[[list[Sample]], bool]:
    """Condition: every chip of the plugin has a series ``name``."""
    chips = {str(state.phy_id) for state in app.inventory.chips()} if app.inventory is not None else set()
    return lambda samples: bool(chips) and {s.labels.get("id") for s in of(samples, name)} >= chips
