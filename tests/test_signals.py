"""Signals as a daemon should take them: SIGHUP re-reads the config file, SIGTERM and SIGINT stop cleanly.

The plugin runs as a real process; what it did is read back from its JSON log.
SIGHUP used to kill it (exit 129) and leave its socket behind.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from plugin_harness import FakeNode, registered
from plugin_process import PluginProcess, plugin_process
from waiting import WAIT

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.slow

RESOURCE = "huawei.com/Ascend310"


def hang_up(plugin: PluginProcess, config: Path, text: str, matches: str) -> dict[str, Any]:
    """Write ``text`` to the config file, send SIGHUP, return the new log line containing ``matches``."""
    seen = len(plugin.lines())
    config.write_text(text, encoding="utf-8")
    plugin.process.send_signal(signal.SIGHUP)
    return plugin.wait_for_line(lambda line: matches in line["msg"], f"a line with {matches!r}", after=seen)


def test_sighup_applies_a_good_config_file_and_refuses_a_bad_one_keeping_the_old(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    config = short_tmp / "config.yaml"
    config.write_text("health_failure_threshold: 3\n", encoding="utf-8")
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", "--config-file", str(config)) as plugin:
        kubelet.wait_until(registered(RESOURCE), WAIT, "registration")
        where = f"config file {config}"
        read, refused = f"{where} re-read", f"{where} refused"

        good = hang_up(plugin, config, "health_failure_threshold: 5\nlog_level: DEBUG\n", read)
        assert good["msg"] == f"{where} re-read: health_failure_threshold is now 5, log_level is now 'DEBUG'"
        assert good["changed"] == ["health_failure_threshold", "log_level"]
        # The running process follows: a registration failing the same way again is a DEBUG line now.
        kubelet.refuse_registrations(3, "the kubelet is not ready")
        kubelet.restart()
        repeated = plugin.wait_for_line(lambda line: line["level"] == "DEBUG", "a DEBUG line")
        assert "failed the same way" in repeated["msg"]
        kubelet.wait_until(registered(RESOURCE, times=2), WAIT, "registration after the refusals")

        bad_yaml = hang_up(plugin, config, "health_failure_threshold: [5\n", refused)
        assert bad_yaml["msg"].startswith(f"{where} refused, the current configuration stays: ")
        assert "is not valid YAML" in bad_yaml["msg"]

        bad_value = hang_up(plugin, config, "health_failure_threshold: 0\n", refused)
        assert (
            "invalid setting health_failure_threshold (--health-failure-threshold / "
            "ASCEND_DP_HEALTH_FAILURE_THRESHOLD): got 0" in bad_value["msg"]
        )

        frozen = hang_up(plugin, config, "health_failure_threshold: 5\nsocket_name: other.sock\n", refused)
        assert "settings socket_name cannot change at run time; allowed: " in frozen["msg"]

        # The configuration in force is still the good file's: reading it again changes nothing.
        same = hang_up(plugin, config, "health_failure_threshold: 5\nlog_level: DEBUG\n", read)
        assert same["msg"] == f"{where} re-read: nothing changed"

        assert plugin.process.poll() is None, "SIGHUP ended the plugin"
        assert len(kubelet.registrations) == 2
        plugin.process.send_signal(signal.SIGTERM)
        assert plugin.process.wait(timeout=WAIT) == 0
    assert not (plugin_dir / "Ascend310.sock").exists()


def test_sighup_without_a_config_file_says_so_and_sigint_then_stops_cleanly(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log") as plugin:
        kubelet.wait_until(registered(RESOURCE), WAIT, "registration")
        plugin.process.send_signal(signal.SIGHUP)
        plugin.wait_for_line(lambda line: "no config file is set (config_file)" in line["msg"], "the warning")
        assert plugin.process.poll() is None
        plugin.process.send_signal(signal.SIGINT)
        assert plugin.process.wait(timeout=WAIT) == 0
    kubelet.wait_until(lambda k: not k.resources[RESOURCE].stream_open, WAIT, "stream closed")
    assert kubelet.resources[RESOURCE].stream_end == "OK"
    assert not (plugin_dir / "Ascend310.sock").exists()
