"""The plain scrape job docs/telemetry.md gives: Prometheus accepts it, and it finds the chart's pods.

``promtool check config`` (Debian's prometheus package) checks the job as
Prometheus would load it. Debian builds Prometheus without Kubernetes discovery,
so where promtool does not know ``kubernetes_sd_configs`` it checks the job with
that one block swapped for a static target (the relabelling and every other
field as written); the discovery block's pod label selector and port name are
held to the pods the chart renders, and the scrape annotations to the plugin's port.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_harness import ChartRenderer, Rendering
from prometheus_server import prometheus_binary

DOC = Path(__file__).resolve().parents[1] / "docs" / "telemetry.md"


def scrape_job() -> dict[str, Any]:
    section = DOC.read_text(encoding="utf-8").split("## Prometheus and Grafana", 1)[1]
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)]
    (config,) = [block for block in blocks if "scrape_configs" in block]
    (job,) = config["scrape_configs"]
    assert isinstance(job, dict)
    return job


WITHOUT_KUBERNETES_SD = "field kubernetes_sd_configs not found"


def promtool_check(job: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool") or str(Path(prometheus_binary()).with_name("promtool"))
    config = directory / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}), encoding="utf-8")
    command = [promtool, "check", "config", "--syntax-only", str(config)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_promtool_accepts_the_scrape_job(tmp_path: Path) -> None:
    job = scrape_job()
    result = promtool_check(job, tmp_path)
    if WITHOUT_KUBERNETES_SD in result.stdout + result.stderr:  # Debian's build
        job = {key: value for key, value in job.items() if key != "kubernetes_sd_configs"}
        job["static_configs"] = [{"targets": ["10.0.0.7:11251"]}]
        result = promtool_check(job, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = {**job, "relabel_configs": [{"action": "keep", "source_labels": ["a"], "regex": "("}]}
    assert promtool_check(broken, tmp_path).returncode != 0, "promtool checks the relabelling"


@pytest.mark.parametrize("values", [{}, {"serve": "by-node-label"}], ids=["device plugin", "both modes"])
def test_the_job_finds_every_plugin_pod_on_its_port(chart: ChartRenderer, values: dict[str, Any]) -> None:
    rendering: Rendering = chart.render(values)
    job = scrape_job()
    [discovery] = job["kubernetes_sd_configs"]
    assert rendering.namespace in discovery["namespaces"]["names"]
    [selector] = discovery["selectors"]
    key, value = selector["label"].split("=")
    [keep] = [rule for rule in job["relabel_configs"] if rule.get("action") == "keep"]
    node = [rule for rule in job["relabel_configs"] if rule.get("target_label") == "node"]
    assert node == [{"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}]
    for daemonset in rendering.of_kind("DaemonSet"):
        template = daemonset["spec"]["template"]
        assert template["metadata"]["labels"][key] == value
        (container,) = template["spec"]["containers"]
        assert [port["name"] for port in container["ports"] if re.fullmatch(keep["regex"], port["name"])] == [
            "http"
        ]


@pytest.mark.parametrize("port", [11251, 9400])
def test_the_pods_carry_the_scrape_annotations(chart: ChartRenderer, port: int) -> None:
    rendering = chart.render({"httpPort": port})
    annotations = rendering.daemonset["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }
    assert rendering.container["ports"][0]["containerPort"] == port


def test_the_scrape_annotations_are_a_value(chart: ChartRenderer) -> None:
    rendering = chart.render({"metrics": {"scrapeAnnotations": False}, "podAnnotations": {"a": "b"}})
    assert rendering.daemonset["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}


def test_the_dashboard_file_is_named_where_operators_look() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "`charts/ascend-device-plugin/dashboards/ascend-npu.json`" in text
    assert (
        Path(__file__).resolve().parents[1] / "charts/ascend-device-plugin/dashboards/ascend-npu.json"
    ).is_file()
