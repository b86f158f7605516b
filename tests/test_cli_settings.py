"""Settings: defaults < config file < environment < command line; bad values exit 2 with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from ascend_plugin.cli import EXIT_BAD_SETTINGS, main
from ascend_plugin.settings import Settings, SettingsError, load_settings
from backends.families import FAMILY_NAMES


def test_each_source_overrides_the_one_below(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("health_interval: 2.5\nlog_level: debug\nresource_name: file.example/npu\n")
    monkeypatch.setenv("ASCEND_DP_CONFIG_FILE", str(config))
    monkeypatch.setenv("ASCEND_DP_LOG_LEVEL", "warning")
    monkeypatch.setenv("ASCEND_DP_RESOURCE_NAME", "env.example/npu")
    settings = load_settings(
        {"backend": "fake", "fake_scenario": "/s.json", "resource_name": "cli.example/npu"}
    )
    assert settings.health_interval == 2.5  # file beats default
    assert settings.log_level == "WARNING"  # env beats file
    assert settings.resource_name == "cli.example/npu"  # command line beats env
    assert settings.dcmi_call_timeout == 5.0  # default


def test_lists_come_comma_separated_from_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_DP_SHARED_NODES", "/dev/a, /dev/b")
    settings = load_settings({"backend": "fake", "fake_scenario": "/s.json", "driver_mounts": "/x,/y"})
    assert settings.shared_nodes == ("/dev/a", "/dev/b")
    assert settings.driver_mounts == ("/x", "/y")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--health-interval", "soon"],
            "invalid setting health_interval (--health-interval / ASCEND_DP_HEALTH_INTERVAL): got 'soon'",
        ),
        (["--health-interval", "0"], "got '0': must be above 0 and at most 3600 seconds"),
        (["--backend", "gpu"], "got 'gpu': Input should be 'dcmi' or 'fake'"),
        (["--log-format", "xml"], "Input should be 'text' or 'json'"),
        (["--resource-name", "Ascend310"], "must be '<domain>/<name>'"),
        (["--resource-name", "kubernetes.io/npu"], "must not be in the kubernetes.io domain"),
        (["--ai-core-min", "4", "--ai-core-max", "2"], "ai_core_min 4.0 is above ai_core_max 2.0"),
        (["--no-such-flag", "1"], None),
    ],
)
def test_bad_settings_exit_2_naming_field_value_and_rule(
    argv: list[str], expected: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--backend", "fake", "--fake-scenario", "/s.json"]
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(main([*base, *argv]))
    assert exited.value.code == EXIT_BAD_SETTINGS
    if expected is not None:
        assert expected in capsys.readouterr().err


def test_fake_backend_needs_a_scenario() -> None:
    with pytest.raises(SettingsError, match=r"backend 'fake' needs fake_scenario \(--fake-scenario PATH\)"):
        load_settings({"backend": "fake"})


def test_a_broken_config_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("- just\n- a list\n")
    with pytest.raises(SettingsError, match="must hold a mapping"):
        load_settings({"config_file": str(config), "backend": "fake", "fake_scenario": "/s"})


def test_every_setting_is_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in help_text


def test_chip_family_choices_are_the_families() -> None:
    annotation = Settings.model_fields["chip_family"].annotation
    literal = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    assert set(typing.get_args(literal)) == set(FAMILY_NAMES)


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip()


def test_a_fault_level_file_that_cannot_be_used_exits_2_naming_it(tmp_path: Path) -> None:
    """Read when the plugin starts, not with the settings: still a settings error, not a traceback."""
    levels = tmp_path / "levels.json"
    levels.write_text("{not json")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ASCEND_", "NODE_NAME"))}
    command = [
        *(sys.executable, "-m", "ascend_plugin", "run", "--backend", "fake"),
        *("--fake-scenario", str(tmp_path / "none.json"), "--fault-levels-file", str(levels)),
        *("--device-plugin-path", str(tmp_path / "plugins"), "--http-address", ""),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == EXIT_BAD_SETTINGS, result.stderr
    assert f"refusing to start: fault-level file {levels} is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
