"""The chart deploys the plugin version it was made for."""

from __future__ import annotations

import re
import tomllib

import yaml
from chart_harness import CHART_DIR, DEFAULTS, ROOT, Rendering

SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def chart_yaml() -> dict[str, object]:
    data = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_app_version_is_the_package_version() -> None:
    """A release of the package and the chart that deploys it move together."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart_yaml()["appVersion"] == project["version"]


def test_chart_version_is_semver() -> None:
    assert SEMVER.match(str(chart_yaml()["version"]))


def test_default_image_and_labels_carry_the_app_version(renderings: dict[str, Rendering]) -> None:
    rendering = renderings[DEFAULTS]
    app_version = chart_yaml()["appVersion"]
    assert rendering.container["image"].endswith(f":{app_version}")
    assert rendering.daemonset["metadata"]["labels"]["app.kubernetes.io/version"] == app_version
