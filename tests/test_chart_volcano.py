"""The chart in Volcano mode: the setting reaches the plugin, pods RBAC, the pod-resources mount."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_harness import DEFAULTS, ChartRenderer, Rendering
from test_chart_settings import DOWNWARD, clear_settings_env

from ascend_plugin.settings import load_settings


@pytest.fixture(scope="module")
def volcano(chart: ChartRenderer) -> Rendering:
    return chart.render({"settings": {"volcano": True}})


def test_the_setting_reaches_the_plugin_in_the_pod(
    volcano: Rendering, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_settings_env(monkeypatch)
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr("ascend_plugin.settings.SERVICE_ACCOUNT_TOKEN", str(token))
    for name, value in {**volcano.plain_env, **DOWNWARD, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.volcano
    assert settings.node_name == DOWNWARD["NODE_NAME"]


def test_pods_are_granted_only_in_volcano_mode(volcano: Rendering, renderings: dict[str, Rendering]) -> None:
    for verb in ("get", "list", "watch", "patch"):
        assert volcano.allows(verb, "", "pods", None), verb
        assert volcano.allows(verb, "", "pods", "training"), verb
    # Without Volcano mode a pod holding the node's chips is only read, by name: did Volcano choose them?
    assert renderings[DEFAULTS].allows("get", "", "pods", "training", "resnet-0")
    for verb in ("list", "watch", "patch"):
        assert not renderings[DEFAULTS].allows(verb, "", "pods", None), verb
    for verb in ("create", "update", "delete", "deletecollection"):
        assert not volcano.allows(verb, "", "pods", "training"), verb
    assert not volcano.allows("patch", "", "pods/status", "training")
    assert volcano.allows("get", "", "nodes", None)  # the node's InternalIP for the rank table


def test_the_pod_resources_directory_is_mounted_read_only_from_the_host_in_every_mode(
    volcano: Rendering, renderings: dict[str, Rendering]
) -> None:
    for rendering in (volcano, renderings[DEFAULTS]):
        mount, volume = rendering.volume_at("/var/lib/kubelet/pod-resources")
        assert mount["readOnly"] is True
        assert volume["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}


def test_a_moved_socket_moves_the_mount(chart: ChartRenderer) -> None:
    rendering = chart.render(
        {"settings": {"volcano": True, "podResourcesSocket": "/data/kubelet/pod-resources/kubelet.sock"}}
    )
    _, volume = rendering.volume_at("/data/kubelet/pod-resources")
    assert volume["hostPath"]["path"] == "/data/kubelet/pod-resources"
    assert rendering.plain_env["ASCEND_DP_POD_RESOURCES_SOCKET"] == "/data/kubelet/pod-resources/kubelet.sock"
