"""Volcano mode needs node_name and access to the API server; without either the plugin exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_plugin import settings as settings_module
from ascend_plugin.cli import EXIT_BAD_SETTINGS, main
from ascend_plugin.settings import load_settings

FAKE = ["run", "--backend", "fake", "--fake-scenario", "/s.json"]


@pytest.fixture(autouse=True)
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NODE_NAME", "KUBERNETES_SERVICE_HOST", "ASCEND_DP_NODE_NAME", "ASCEND_DP_KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_without_node_name_volcano_exits_2_naming_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*FAKE, "--volcano", "--kubeconfig", "/k"]) == EXIT_BAD_SETTINGS
    error = capsys.readouterr().err
    assert "volcano (--volcano / ASCEND_DP_VOLCANO) needs node_name" in error
    assert "(--node-name / ASCEND_DP_NODE_NAME" in error


def test_without_api_access_volcano_exits_2_naming_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*FAKE, "--volcano", "--node-name", "n1"]) == EXIT_BAD_SETTINGS
    error = capsys.readouterr().err
    assert "needs access to the API server: set kubeconfig (--kubeconfig / ASCEND_DP_KUBECONFIG)" in error
    assert "KUBERNETES_SERVICE_HOST" in error


def test_a_pod_with_a_service_account_is_api_access(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr(settings_module, "SERVICE_ACCOUNT_TOKEN", str(token))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("NODE_NAME", "n1")
    settings = load_settings({"backend": "fake", "fake_scenario": "/s.json", "volcano": True})
    assert settings.volcano
    assert settings.pod_resources_socket == Path("/var/lib/kubelet/pod-resources/kubelet.sock")


def test_volcano_is_off_by_default_and_needs_nothing_then() -> None:
    assert not load_settings({"backend": "fake", "fake_scenario": "/s.json"}).volcano
