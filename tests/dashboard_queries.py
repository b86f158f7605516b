"""The chart's Grafana dashboard: its JSON, every panel's queries, the node variable's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[1] / "charts/ascend-device-plugin/dashboards/ascend-npu.json"


def dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def panel_queries(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel that has queries."""
    return [
        (panel["title"], target["expr"]) for panel in data["panels"] for target in panel.get("targets", ())
    ]


def variable(data: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [item for item in data["templating"]["list"] if item["name"] == name]
    assert isinstance(found, dict)
    return found
