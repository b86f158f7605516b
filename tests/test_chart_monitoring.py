"""serviceMonitor.enabled: Prometheus scrapes /metrics of every plugin pod."""

from __future__ import annotations

import pytest
from chart_harness import VALUES_FILES, ChartRenderer, Rendering


@pytest.fixture(scope="module")
def monitored(chart: ChartRenderer) -> Rendering:
    return chart.render(
        {"httpPort": 9400, "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}
    )


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_off_by_default(renderings: dict[str, Rendering], values_file: str) -> None:
    kinds = {manifest["kind"] for manifest in renderings[values_file].manifests}
    assert not kinds & {"Service", "ServiceMonitor"}


def test_headless_service_selects_the_plugin_pods(monitored: Rendering) -> None:
    service = monitored.one("Service")
    assert service["spec"]["clusterIP"] == "None", "one target per pod, no load balancing"
    pod_labels = monitored.daemonset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 9400, "targetPort": "http", "protocol": "TCP"}
    ]


def test_service_monitor_scrapes_metrics_on_the_named_port(monitored: Rendering) -> None:
    monitor = monitored.one("ServiceMonitor")
    service = monitored.one("Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [monitored.namespace]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in endpoint[
        "relabelings"
    ]


def test_the_scraped_port_is_the_plugins(monitored: Rendering) -> None:
    (port,) = monitored.container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", 9400)
    assert monitored.plain_env["ASCEND_DP_HTTP_ADDRESS"] == "0.0.0.0:9400"
