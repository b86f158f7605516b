"""metrics.grafanaDashboard.enabled: a ConfigMap Grafana's sidecar loads, holding the telemetry dashboard."""

from __future__ import annotations

import json
import re

import pytest
from chart_harness import VALUES_FILES, ChartRenderer, Rendering
from dashboard_queries import dashboard, panel_queries, variable

LABEL = "grafana_dashboard"


def dashboards(rendering: Rendering) -> list[dict[str, object]]:
    return [
        manifest
        for manifest in rendering.of_kind("ConfigMap")
        if manifest["metadata"].get("labels", {}).get(LABEL) == "1"
    ]


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_off_by_default(renderings: dict[str, Rendering], values_file: str) -> None:
    assert dashboards(renderings[values_file]) == []


def test_on_it_is_a_configmap_labelled_for_the_sidecar_with_the_dashboard(chart: ChartRenderer) -> None:
    rendering = chart.render(
        {"metrics": {"grafanaDashboard": {"enabled": True, "labels": {"grafana_folder": "Ascend"}}}}
    )
    [configmap] = dashboards(rendering)
    metadata = configmap["metadata"]
    assert isinstance(metadata, dict)
    assert metadata["namespace"] == rendering.namespace
    assert metadata["labels"]["grafana_folder"] == "Ascend"
    data = configmap["data"]
    assert isinstance(data, dict)
    assert json.loads(data["ascend-npu.json"]) == dashboard()


def test_the_namespace_can_be_grafanas(chart: ChartRenderer) -> None:
    rendering = chart.render({"metrics": {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}})
    [configmap] = dashboards(rendering)
    assert configmap["metadata"]["namespace"] == "monitoring"  # type: ignore[index]


def test_every_query_is_filtered_by_the_node_variable() -> None:
    """The node comes from the plugin's own ascend_node_info, not from a label a scrape config must add.

    The hidden ``instance`` variable is the scrape targets of the chosen nodes; every query is filtered
    by it, and none by a ``node`` label (only the chart's ServiceMonitor puts one on the series).
    """
    data = dashboard()
    node = variable(data, "node")
    assert node["query"]["query"] == "label_values(ascend_node_info, node_name)"
    assert node["includeAll"] is True
    instance = variable(data, "instance")
    assert instance["query"]["query"] == 'label_values(ascend_node_info{node_name=~"$node"}, instance)'
    assert (instance["includeAll"], instance["multi"], instance["hide"]) == (True, True, 2)
    assert "allValue" not in instance, "All expands to the chosen nodes' targets, never to every target"
    queries = panel_queries(data)
    assert queries
    for title, expr in queries:
        selectors = re.findall(r"\{([^}]*)\}", expr)
        assert selectors, (title, expr)
        assert all('instance=~"$instance"' in selector for selector in selectors), (title, expr)
        assert "node=" not in expr, (title, expr)
        assert "node!" not in expr, (title, expr)


@pytest.mark.parametrize(
    ("metric", "what"),
    [
        ("npu_chip_info_utilization", "utilization per chip"),
        ("npu_chip_info_hbm_used_memory", "HBM per chip"),
        ("npu_chip_info_temperature", "temperature per chip"),
        ("npu_chip_info_power", "power per chip"),
        ("npu_chip_info_health_status", "health per chip"),
        ("container_npu_utilization", "utilization per pod"),
        ("container_npu_used_memory", "memory per pod"),
    ],
)
def test_the_dashboard_shows(metric: str, what: str) -> None:
    assert any(metric in expr for _, expr in panel_queries(dashboard())), what
