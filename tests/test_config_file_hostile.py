"""A config file that cannot be a settings file is refused on SIGHUP, and the plugin serves on.

A FIFO at the config path (opening it would wait for a writer), a 10 MiB file,
a few hundred bytes of YAML aliases that expand to gigabytes: each is refused
within moments with one log line of bounded length, the event loop keeps
answering /healthz, and memory stays where it was. An unknown key is refused
naming the key and the file. The re-read runs off the event loop
(bench/config_reload.py measures the loop's lag meanwhile).
"""

from __future__ import annotations

import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from log_records import lines
from plugin_harness import FakeNode
from plugin_process import PluginProcess, plugin_process
from waiting import eventually

from ascend_plugin.live_config import LiveConfig
from ascend_plugin.settings import (
    CONFIG_FILE_LIMIT,
    CONFIG_FILE_VALUES,
    Settings,
    SettingsError,
    load_settings,
    read_config_file,
)

LIVE_CONFIG = "ascend_plugin.live_config"
LONGEST_LINE = 4096  # characters of the refusal's line, at most


def alias_bomb(depth: int = 7) -> str:
    """YAML of about 300 bytes whose aliases make 9**depth strings of a setting's value."""
    lines_ = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, depth):
        lines_.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    lines_.append(f"driver_mounts: *a{depth - 1}")
    return "\n".join(lines_) + "\n"


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture
def config(short_tmp: Path) -> Path:
    path = short_tmp / "config.yaml"
    path.write_text("health_failure_threshold: 3\n", encoding="utf-8")
    return path


@pytest.fixture
def plugin(node: FakeNode, plugin_dir: Path, short_tmp: Path, config: Path) -> Iterator[PluginProcess]:
    log = short_tmp / "plugin.log"
    with plugin_process(node, plugin_dir, log, "--config-file", str(config), http=True) as running:
        eventually(lambda: healthy(running), "the endpoint answering", unless=running.exited)
        yield running


def healthy(plugin: PluginProcess) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{plugin.http_port}/healthz", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def hang_up(plugin: PluginProcess, config: Path) -> dict[str, Any]:
    """Send SIGHUP; the re-read's ERROR line (waited for, with the plugin answering meanwhile)."""
    seen = len(plugin.lines())
    plugin.process.send_signal(signal.SIGHUP)
    refused = plugin.wait_for_line(
        lambda line: bool(lines([line], LIVE_CONFIG, level="ERROR", source=f"config file {config}")),
        "the re-read refused",
        after=seen,
    )
    assert healthy(plugin)
    assert len(lines(plugin.lines()[seen:], LIVE_CONFIG)) == 1  # one line, however bad the file
    assert len(refused["msg"]) <= LONGEST_LINE
    return refused


def test_a_fifo_at_the_config_path_is_refused_without_waiting_for_a_writer(
    plugin: PluginProcess, config: Path
) -> None:
    config.unlink()
    os.mkfifo(config)
    refused = hang_up(plugin, config)
    assert f"config file {config} is a FIFO, not a regular file" in refused["msg"]


def test_a_10_mib_file_is_refused_by_its_size(plugin: PluginProcess, config: Path) -> None:
    config.write_text("driver_mounts:\n" + "- /usr/local/dcmi\n" * (10 * 1024 * 1024 // 18), encoding="utf-8")
    refused = hang_up(plugin, config)
    assert f"config file {config} is over 64 KiB" in refused["msg"]


def test_yaml_aliases_are_refused_before_they_expand(plugin: PluginProcess, config: Path) -> None:
    before = peak_rss_kib(plugin.pid)
    config.write_text(alias_bomb(), encoding="utf-8")
    refused = hang_up(plugin, config)
    assert "aliases (*name) are not allowed in a config file" in refused["msg"]
    assert peak_rss_kib(plugin.pid) - before < 32 * 1024, "memory grew by more than 32 MiB"


def test_an_unknown_key_is_refused_naming_the_key_and_the_file(config: Path) -> None:
    config.write_text("health_intervall: 5\n", encoding="utf-8")
    with pytest.raises(SettingsError) as refused:
        load_settings({"config_file": config})
    message = str(refused.value)
    assert f"config file {config}" in message
    assert "'health_intervall' (did you mean health_interval?)" in message


def test_the_largest_file_read_is_the_limit(config: Path) -> None:
    body = "# a comment to pad the file\n"
    config.write_text(body * (CONFIG_FILE_LIMIT // len(body)), encoding="utf-8")
    assert read_config_file(config) == {}
    config.write_text(body * (CONFIG_FILE_LIMIT // len(body) + 1), encoding="utf-8")
    with pytest.raises(SettingsError, match="is over 64 KiB"):
        read_config_file(config)


def test_a_file_of_more_values_than_any_settings_file_is_refused_as_it_is_parsed(config: Path) -> None:
    most = CONFIG_FILE_VALUES - 3  # and the mapping, its key, the list
    config.write_text(f"driver_mounts: [{', '.join(['/d'] * most)}]\n", encoding="utf-8")
    assert len(read_config_file(config)["driver_mounts"]) == most
    config.write_text(f"driver_mounts: [{', '.join(['1'] * 20_000)}]\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=f"a config file holds at most {CONFIG_FILE_VALUES} values"):
        read_config_file(config)


@pytest.mark.anyio
async def test_a_read_that_does_not_return_is_given_up_and_the_loop_runs_on(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ascend_plugin.live_config.RELOAD_TIMEOUT", 0.2)
    current = LiveConfig(load_settings({"config_file": config}))
    released = anyio.Event()
    turns = 0

    def stuck() -> Settings:  # a file system that does not answer
        anyio.from_thread.run_sync(lambda: None)  # (the loop answers its thread meanwhile)
        anyio.from_thread.run(released.wait)
        raise AssertionError("never reached in time")

    async def loop_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(loop_turns)
        assert not await current.reread_config_file(stuck)
        assert turns > 1  # the loop ran while the read was stuck
        released.set()
        tasks.cancel_scope.cancel()
    assert current.settings.health_failure_threshold == 3
