"""The DRA settings: ``run --serve dra`` and its directories; one face only; what serve=dra needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_plugin.cli import EXIT_BAD_SETTINGS, build_parser, main
from ascend_plugin.faces.dra.face import DraSettings
from ascend_plugin.settings import Settings, SettingsError, dra_plugin_dir, load_settings

FAKE = {"backend": "fake", "fake_scenario": "/s.json"}


def test_the_defaults_are_the_device_plugin_and_the_kubelet_s_own_directories() -> None:
    settings = load_settings({**FAKE, "node_name": "n1"})
    assert settings.serve == "device-plugin"
    assert settings.dra_driver_name == "npu.huawei.com"
    assert settings.dra_registry_path == Path("/var/lib/kubelet/plugins_registry")
    assert dra_plugin_dir(settings) == Path("/var/lib/kubelet/plugins/npu.huawei.com")
    assert settings.cdi_spec_dir == Path("/var/run/cdi")
    assert settings.dra_device_taints is None, "wherever the API server keeps them"
    assert settings.dra_taint_effect == "by-level"
    assert settings.vnpu == "static"


def test_the_plugin_directory_follows_the_driver_name_unless_set() -> None:
    renamed = load_settings({**FAKE, "dra_driver_name": "npu.example.com"})
    assert dra_plugin_dir(renamed) == Path("/var/lib/kubelet/plugins/npu.example.com")
    moved = load_settings({**FAKE, "dra_plugin_path": "/var/lib/k0s/kubelet/plugins/npu"})
    assert dra_plugin_dir(moved) == Path("/var/lib/k0s/kubelet/plugins/npu")


def test_run_takes_the_fixed_flags(tmp_path: Path) -> None:
    argv = [
        "run",
        "--serve", "dra",
        "--node-name", "npu-node-1",
        "--kubeconfig", str(tmp_path / "kubeconfig"),
        "--dra-driver-name", "npu.example.com",
        "--dra-registry-path", "/r",
        "--dra-plugin-path", "/p",
        "--cdi-spec-dir", "/c",
        "--dra-device-taints",
    ]  # fmt: skip
    namespace = build_parser().parse_args(argv)
    values = {
        name: getattr(namespace, name) for name in Settings.model_fields if getattr(namespace, name, None)
    }
    settings = load_settings({**FAKE, **values})
    dra = DraSettings.from_settings(settings)
    assert (dra.driver, dra.node, dra.registry_dir, dra.plugin_dir, dra.cdi_spec_dir, dra.device_taints) == (
        "npu.example.com",
        "npu-node-1",
        Path("/r"),
        Path("/p"),
        Path("/c"),
        True,
    )
    assert dra.kubeconfig == tmp_path / "kubeconfig"


def test_the_environment_names_the_face(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_DP_SERVE", "dra")
    monkeypatch.setenv("NODE_NAME", "npu-node-1")
    assert load_settings(FAKE).serve == "dra"


@pytest.mark.parametrize("both", ["device-plugin,dra", "dra,device-plugin", "both"])
def test_both_faces_at_once_are_refused(both: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(main(["run", "--backend", "fake", "--fake-scenario", "/s.json", "--serve", both]))
    assert exited.value.code == EXIT_BAD_SETTINGS
    error = capsys.readouterr().err
    assert "invalid setting serve (--serve / ASCEND_DP_SERVE)" in error
    assert "the scheduler count every chip twice" in error


def test_an_unknown_face_names_the_allowed_ones() -> None:
    with pytest.raises(SettingsError, match="Input should be 'device-plugin' or 'dra'"):
        load_settings({**FAKE, "serve": "csi"})


def test_dra_needs_the_node_s_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SettingsError, match=r"serve 'dra' needs node_name \(--node-name, NODE_NAME"):
        load_settings({**FAKE, "serve": "dra"})


@pytest.mark.parametrize("name", ["NPU.huawei.com", "npu_huawei", "-npu.huawei.com", "a" * 64])
def test_a_driver_name_must_be_a_dns_subdomain_of_at_most_63(name: str) -> None:
    with pytest.raises(SettingsError, match="dra_driver_name"):
        load_settings({**FAKE, "dra_driver_name": name})


def test_volcano_is_refused_with_dra() -> None:
    with pytest.raises(SettingsError, match="volcano chooses chips through the device-plugin API"):
        load_settings({**FAKE, "serve": "dra", "node_name": "n1", "volcano": True, "kubeconfig": "/k"})


def test_shares_and_dynamic_vnpus_are_dra_settings_too() -> None:
    settings = load_settings({**FAKE, "serve": "dra", "node_name": "n1", "share_count": 2})
    assert settings.share_count == 2
    assert load_settings({**FAKE, "serve": "dra", "node_name": "n1", "vnpu": "dynamic"}).vnpu == "dynamic"


def test_dynamic_vnpus_need_the_dra_driver() -> None:
    with pytest.raises(SettingsError, match="vnpu 'dynamic' makes vNPUs when their DRA claims are prepared"):
        load_settings({**FAKE, "vnpu": "dynamic"})


@pytest.mark.parametrize(
    ("flag", "value"), [(["--dra-device-taints"], True), (["--no-dra-device-taints"], False)]
)
def test_the_taint_setting_is_a_flag_with_a_default_of_its_own(flag: list[str], value: bool) -> None:
    arguments = build_parser().parse_args(["run", *flag])
    assert arguments.dra_device_taints is value
    assert build_parser().parse_args(["run"]).dra_device_taints is None


def test_the_taint_effect_setting_reaches_the_driver() -> None:
    base = {**FAKE, "serve": "dra", "node_name": "n1"}
    assert DraSettings.from_settings(load_settings(base)).evict is True
    assert DraSettings.from_settings(load_settings({**base, "dra_taint_effect": "NoSchedule"})).evict is False
    with pytest.raises(SettingsError, match="dra_taint_effect"):
        load_settings({**base, "dra_taint_effect": "PreferNoSchedule"})
