"""The config file re-read on SIGHUP goes through LiveConfig like a config ConfigMap change.

The file is the base the plugin started from; the ConfigMap's keys are
overrides on top. Re-reading the file changes the base, keeps the overrides,
and refuses (changing nothing) what the ConfigMap would refuse too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from log_records import records

from ascend_plugin.faces.kube.config_watch import ConfigWatcher
from ascend_plugin.fault_policy.config import base_config
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.settings import Settings, SettingsError, load_settings


def settings_from(config: Path, text: str) -> Settings:
    config.write_text(text, encoding="utf-8")
    return load_settings(cli_values(config))


def cli_values(config: Path) -> dict[str, Any]:
    """What the command line gave: the same on every re-read."""
    return {"config_file": config, "node_name": None, "http_address": ""}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config.yaml"


def live(config: Path, text: str) -> LiveConfig:
    return LiveConfig(settings_from(config, text))


def test_the_file_s_new_values_apply_and_the_configmap_s_overrides_stay_on_top(config: Path) -> None:
    current = live(config, "health_interval: 1.0\nhealth_failure_threshold: 3\n")
    faults = FaultSources(base_config(None))
    watcher = ConfigWatcher(None, current, faults, "kube-system", "plugin-config")  # type: ignore[arg-type]
    assert watcher.apply({"health_interval": "2"})

    changed = current.rebase(settings_from(config, "health_interval: 3.0\nhealth_failure_threshold: 7\n"))
    assert changed == ["health_failure_threshold"]
    assert current.settings.health_interval == 2.0  # the ConfigMap's key wins over the file
    assert current.settings.health_failure_threshold == 7

    # The ConfigMap's key removed: the setting returns to the file's new value, not the start-up one.
    assert watcher.apply({})
    assert current.settings.health_interval == 3.0


def test_a_file_changing_what_cannot_change_at_run_time_is_refused_like_the_configmap_would(
    config: Path,
) -> None:
    current = live(config, "health_failure_threshold: 3\n")
    before = current.settings
    with pytest.raises(SettingsError) as refused:
        current.rebase(settings_from(config, "health_failure_threshold: 9\nsocket_name: other.sock\n"))
    assert str(refused.value).startswith("settings socket_name cannot change at run time; allowed: ")
    assert current.settings is before
    assert current.startup_settings.socket_name is None


@pytest.mark.anyio
async def test_reread_logs_what_it_did_and_keeps_the_old_configuration_when_the_file_is_bad(
    config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    current = live(config, "health_failure_threshold: 3\n")
    calls: list[Any] = []
    current.on_change(calls.append)

    await anyio.Path(config).write_text("health_failure_threshold: [\n", encoding="utf-8")

    def reload() -> Settings:
        return load_settings(cli_values(config))

    assert not await current.reread_config_file(reload)
    where = f"config file {config}"
    (refused,) = records(caplog, "ascend_plugin.live_config", level=logging.ERROR, source=where)
    assert "not valid YAML" in refused.getMessage()  # what is wrong with the file
    assert current.settings.health_failure_threshold == 3
    assert calls == []

    await anyio.Path(config).write_text("health_failure_threshold: 4\n", encoding="utf-8")
    assert await current.reread_config_file(reload)
    (reread,) = records(caplog, "ascend_plugin.live_config", level=logging.INFO, source=where)
    assert reread.changed == ["health_failure_threshold"]  # type: ignore[attr-defined]
    assert current.settings.health_failure_threshold == 4
    assert calls == [["health_failure_threshold"]]
