"""``ascend-device-plugin run`` as a real process for tests: start it, read its JSON log, ask its probes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_dcmi.players import CFakePlayer
from local_port import free_port
from plugin_harness import FakeNode
from waiting import eventually


@dataclass
class PluginProcess:
    """One plugin process on the fake backend, logging JSON lines to ``log``."""

    process: subprocess.Popen[bytes]
    log: Path
    http_port: int | None = None
    _lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def lines(self) -> list[dict[str, Any]]:
        """Every JSON log line so far."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        parsed = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                parsed.append(json.loads(line))
        return parsed

    def wait_for_line(
        self, matches: Callable[[dict[str, Any]], bool], what: str, after: int = 0
    ) -> dict[str, Any]:
        """The first log line from line ``after`` on that ``matches`` accepts, waiting for it."""
        return eventually(
            lambda: next((line for line in self.lines()[after:] if matches(line)), None),
            what,
            every=0.02,
            unless=self.exited,
        )

    def exited(self) -> str | None:
        """Why waiting for the plugin is pointless: it has exited (None while it runs)."""
        code = self.process.poll()
        return None if code is None else f"plugin exited with {code}"

    def readiness(self) -> tuple[int, str]:
        """GET /readyz: (status, body)."""
        return self.get("/readyz")

    def liveness(self) -> tuple[int, str]:
        """GET /healthz: (status, body)."""
        return self.get("/healthz")

    def get(self, path: str) -> tuple[int, str]:
        """GET ``path`` of the HTTP endpoint: (status, body)."""
        assert self.http_port is not None, "started without an HTTP endpoint"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def plugin_command(node: FakeNode, plugin_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ascend_plugin", "run",
        "--backend", "fake", "--fake-scenario", str(node.scenario),
        "--device-plugin-path", str(plugin_dir), "--host-root", str(node.host_root),
        "--health-interval", "0.1", "--kubelet-watch-interval", "0.02",
        "--log-format", "json", *extra,
    ]  # fmt: skip


def on_c_fake(player: CFakePlayer) -> tuple[str, ...]:
    """The flags that run the plugin on the C fake libdcmi.so through the real binding.

    The ``c_fake`` fixture points FAKE_DCMI_SCENARIO at the player's scenario; the process inherits it.
    """
    return (
        "--backend",
        "dcmi",
        "--dcmi-library",
        str(player.current_library()),
        "--dcmi-allow-untrusted-library",
    )


@contextlib.contextmanager
def plugin_process(
    node: FakeNode,
    plugin_dir: Path,
    log: Path,
    *extra: str,
    http: bool = False,
    wrapper: Sequence[str] = (),
) -> Iterator[PluginProcess]:
    """A running plugin process (through ``wrapper``, e.g. setpriv), killed at the end if still running."""
    port = free_port() if http else None
    address = f"127.0.0.1:{port}" if port else ""
    command = [*wrapper, *plugin_command(node, plugin_dir, "--http-address", address, *extra)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "NODE_NAME": ""}
        )
    running = PluginProcess(process, log, port)
    try:
        yield running
    finally:
        running.stop()
