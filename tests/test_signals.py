"""Signals as a daemon should take them: SIGHUP re-reads the config file, SIGTERM and SIGINT stop cleanly.

The plugin runs as a real process; what it did is read back from its JSON log.
SIGHUP left at its default would kill it (exit 129) and leave its socket behind.
SIGTERM while a driver call hangs (on the C fake libdcmi.so) stops it by that
call's deadline, saying what it waited for and what it left behind.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from library_threads import hanging_in_the_c_fake
from log_records import lines
from plugin_harness import FakeNode, health_of, registered
from plugin_process import PluginProcess, plugin_process
from waiting import WAIT, eventually

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.slow

RESOURCE = "huawei.com/Ascend310"
LIVE_CONFIG = "ascend_plugin.live_config"  # the re-read's outcome: INFO applied, ERROR refused
REGISTRAR = "ascend_plugin.faces.deviceplugin.registrar"


def hang_up(plugin: PluginProcess, config: Path, text: str, level: str) -> dict[str, Any]:
    """Write ``text`` to the config file, send SIGHUP, return the re-read's new line at ``level``."""
    seen = len(plugin.lines())
    config.write_text(text, encoding="utf-8")
    plugin.process.send_signal(signal.SIGHUP)
    source = f"config file {config}"
    return plugin.wait_for_line(
        lambda line: bool(lines([line], LIVE_CONFIG, level=level, source=source)),
        f"the re-read of {source} at {level}",
        after=seen,
    )


def test_sighup_applies_a_good_config_file_and_refuses_a_bad_one_keeping_the_old(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    config = short_tmp / "config.yaml"
    config.write_text("health_failure_threshold: 3\n", encoding="utf-8")
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", "--config-file", str(config)) as plugin:
        kubelet.wait_until(registered(RESOURCE), WAIT, "registration")
        good = hang_up(plugin, config, "health_failure_threshold: 5\nlog_level: DEBUG\n", "INFO")
        assert good["changed"] == ["health_failure_threshold", "log_level"]
        # The running process follows: a registration failing the same way again is a DEBUG line now.
        kubelet.refuse_registrations(3, "the kubelet is not ready")
        kubelet.restart()
        repeated = plugin.wait_for_line(
            lambda line: bool(lines([line], REGISTRAR, level="DEBUG")) and "attempt" in line,
            "a failed attempt repeated, at DEBUG",
        )
        assert "the kubelet is not ready" in repeated["error"]
        kubelet.wait_until(registered(RESOURCE, times=2), WAIT, "registration after the refusals")

        # Each refusal says what is wrong in the file, in the words of the setting to fix.
        bad_yaml = hang_up(plugin, config, "health_failure_threshold: [5\n", "ERROR")
        assert "not valid YAML" in bad_yaml["msg"]

        bad_value = hang_up(plugin, config, "health_failure_threshold: 0\n", "ERROR")
        for fact in (
            "health_failure_threshold",
            "--health-failure-threshold",
            "ASCEND_DP_HEALTH_FAILURE_THRESHOLD",
        ):
            assert fact in bad_value["msg"]
        assert "got 0" in bad_value["msg"]

        frozen = hang_up(plugin, config, "health_failure_threshold: 5\nsocket_name: other.sock\n", "ERROR")
        said, allowed = frozen["msg"].split("allowed: ")
        assert "socket_name" in said
        assert "health_failure_threshold" in allowed

        # The configuration in force is still the good file's: reading it again changes nothing.
        same = hang_up(plugin, config, "health_failure_threshold: 5\nlog_level: DEBUG\n", "INFO")
        assert same["changed"] == []

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
        warning = plugin.wait_for_line(
            lambda line: bool(lines([line], LIVE_CONFIG, level="WARNING")), "the warning"
        )
        assert "config_file" in warning["msg"]  # the setting that would give SIGHUP a file to read
        assert plugin.process.poll() is None
        plugin.process.send_signal(signal.SIGINT)
        assert plugin.process.wait(timeout=WAIT) == 0
    kubelet.wait_until(lambda k: not k.resources[RESOURCE].stream_open, WAIT, "stream closed")
    assert kubelet.resources[RESOURCE].stream_end == "OK"
    assert not (plugin_dir / "Ascend310.sock").exists()


def _pair(hang_chip_0: bool) -> FakeScenario:
    chips = [
        {"phy_id": 0, "card_id": 4, "hang": ["health"] if hang_chip_0 else []},
        {"phy_id": 1, "card_id": 4},
    ]
    return FakeScenario.model_validate({"chip_name": "310P3", "chips": chips})


def test_sigterm_during_a_fresh_hang_exits_by_the_calls_deadline_and_says_what_it_left(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    """SIGTERM before the hung call's timeout: the exit waits for its deadline, not for the call to return."""
    c_fake.update(_pair(hang_chip_0=False))
    node = FakeNode(c_fake.scenario_path, short_tmp / "host")
    node.add_host_paths("/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager")
    dcmi = ["--backend", "dcmi", "--dcmi-library", str(c_fake.current_library())]
    extra = [*dcmi, "--dcmi-allow-untrusted-library", "--dcmi-call-timeout", "3"]
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", *extra) as plugin:
        chip_0 = health_of("huawei.com/Ascend310P", "Ascend310P-0")
        kubelet.wait_until(lambda k: chip_0(k) == "Healthy", WAIT, "chip 0 offered healthy")
        assert not hanging_in_the_c_fake(plugin.pid)
        c_fake.update(_pair(hang_chip_0=True))  # and it never stops hanging
        eventually(
            lambda: hanging_in_the_c_fake(plugin.pid), "chip 0's health call hangs", unless=plugin.exited
        )
        plugin.process.send_signal(signal.SIGTERM)
        assert plugin.process.wait(timeout=WAIT) == 0
        said = plugin.lines()
    [stop] = [n for n, line in enumerate(said) if line["msg"] == "received SIGTERM; shutting down"]
    after = [line["msg"] for line in said[stop:]]
    [waited] = [msg for msg in after if msg.startswith("waiting up to")]
    assert "read_health on chip 0" in waited
    [left] = [msg for msg in after if msg.startswith("calls still hang inside the chip library")]
    assert "driver call read_health on chip 0 stuck for" in left
    assert after[-1] == "stopped"
    assert not (plugin_dir / "Ascend310P.sock").exists()
