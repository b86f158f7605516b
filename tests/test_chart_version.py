"""The chart deploys the plugin version it was made for."""

from __future__ import annotations

import re
from importlib.metadata import version

import yaml
from chart_harness import CHART_DIR, DEFAULTS, Rendering

from ascend_plugin import __version__

SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def chart_yaml() -> dict[str, object]:
    data = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_app_version_is_the_package_version() -> None:
    """A release of the package and the chart that deploys it move together."""
    assert chart_yaml()["appVersion"] == __version__


def test_the_installed_package_carries_the_version_the_plugin_reports() -> None:
    """The build reads the version from ``ascend_plugin/__init__.py``: pip shows what ``--version`` says."""
    assert version("ascend-device-plugin") == __version__


def test_chart_version_is_semver() -> None:
    assert SEMVER.match(str(chart_yaml()["version"]))


def test_default_image_and_labels_carry_the_app_version(renderings: dict[str, Rendering]) -> None:
    rendering = renderings[DEFAULTS]
    app_version = chart_yaml()["appVersion"]
    assert rendering.container["image"].endswith(f":{app_version}")
    assert rendering.daemonset["metadata"]["labels"]["app.kubernetes.io/version"] == app_version
