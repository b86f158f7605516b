"""A real Prometheus (Debian's ``prometheus``) scraping targets on this machine, asked over its HTTP API.

.ci/run installs the package; where it is not installed and cannot be (no root,
no apt-get), the tests that need it are skipped with that reason, except under
CI, where a missing Prometheus is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_port import free_port

INSTALL = "apt-get install prometheus (.ci/run does)"


def prometheus_binary() -> str:
    """The prometheus command; skips the test (fails it under CI) when the package is not installed."""
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"Debian's prometheus is not installed: {INSTALL}")
        pytest.skip(f"Debian's prometheus is not installed here: {INSTALL}")
    return found


class Prometheus:
    """One Prometheus process scraping ``targets`` (host:port) every second, each with ``labels``."""

    def __init__(self, directory: Path, targets: Sequence[str], labels: Mapping[str, str]) -> None:
        self.directory = directory
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "ascend-device-plugin",
                    "static_configs": [{"targets": list(targets), "labels": dict(labels)}],
                }
            ],
        }
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        self.log = (directory / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def output(self) -> str:
        """Prometheus' own log, for a failure report."""
        return (self.directory / "prometheus.log").read_text(encoding="utf-8", errors="replace")[-4000:]

    def get(self, path: str, **query: str) -> Any:
        """GET an API path (``/api/v1/query`` ...), its JSON; None while Prometheus does not answer."""
        url = f"http://127.0.0.1:{self.port}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.process.returncode}:\n{self.output()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (empty while it has no data)."""
        answer = self.get("/api/v1/query", query=expr)
        if answer is None:
            return []
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's matrix."""
        answer = self.get("/api/v1/query_range", query=expr, start=str(start), end=str(end), step=f"{step:g}")
        assert answer is not None
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result
