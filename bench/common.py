"""Shared by the benchmarks: a fake node on disk, a plugin process, figures printed the same way."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tests' API server stand-in

if TYPE_CHECKING:
    from fake_apiserver import FakeApiServer

CLK_TCK = os.sysconf("SC_CLK_TCK")
API_WAIT = 60.0  # seconds a call to the fake API server's loop may take
T = TypeVar("T")


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def describe_ms(name: str, seconds: Sequence[float]) -> str:
    """One line of latency figures in milliseconds."""
    ms = [value * 1000 for value in seconds]
    return (
        f"{name}: n={len(ms)} p50={statistics.median(ms):.3f} ms p90={percentile(ms, 0.9):.3f} ms "
        f"p99={percentile(ms, 0.99):.3f} ms max={max(ms):.3f} ms"
    )


def rss_mib(pid: int) -> float:
    """Resident memory of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class Workspace:
    """A temporary directory holding a scenario, a host root and the device-plugin directory.

    ``chips``: how many chips' device nodes (``davinci<N>``) the host root has.
    """

    root: Path
    chips: int = 1

    @classmethod
    def create(cls, chips: int = 1) -> Workspace:
        return cls(Path(tempfile.mkdtemp(prefix="adp-bench-", dir="/tmp")), chips)

    @property
    def plugin_dir(self) -> Path:
        return self.root / "dp"

    @property
    def scenario(self) -> Path:
        return self.root / "node.json"

    @property
    def host_root(self) -> Path:
        return self.root / "host"

    def write_scenario(self, scenario: dict[str, Any]) -> None:
        temporary = self.scenario.with_suffix(".tmp")
        temporary.write_text(json.dumps(scenario))
        temporary.replace(self.scenario)

    def make_device_nodes(self) -> None:
        """The host's device nodes a plugin hands over (plain files: nothing opens them)."""
        chips = (f"davinci{phy}" for phy in range(self.chips))
        for node in (*chips, "davinci_manager", "hisi_hdc", "devmm_svm"):
            path = self.host_root / "dev" / node
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def start_plugin(
        self,
        *extra: str,
        env: dict[str, str] | None = None,
        entry: Sequence[str] = ("-m", "ascend_plugin"),
        stderr: IO[bytes] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """The plugin as a real process on this workspace (fake backend); ``entry`` runs its command.

        Its log goes to ``stderr`` when given (a file to count lines in), else to this script's. ``cwd``:
        where it runs (``python -m`` imports from there first: the source tree of another version).
        """
        self.make_device_nodes()
        command = [
            sys.executable, *entry, "run",
            "--backend", "fake", "--fake-scenario", str(self.scenario),
            "--device-plugin-path", str(self.plugin_dir), "--host-root", str(self.host_root),
            "--http-address", "", "--log-level", "WARNING", *extra,
        ]  # fmt: skip
        return subprocess.Popen(command, env={**os.environ, **(env or {})}, stderr=stderr, cwd=cwd)


def print_command() -> None:
    """Say how the figures were produced."""
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {os.cpu_count()} CPUs, {os.uname().machine}, Python {sys.version.split()[0]}")


class ApiServerThread:
    """The fake API server on an event loop of its own thread, so a bench script can stay synchronous.

    The server's state is only read and changed on that loop: :meth:`call` runs a plain function there,
    :meth:`run` a coroutine; both wait for the answer.
    """

    def __init__(self, kube_version: str | None = None) -> None:
        from fake_apiserver import FakeApiServer

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-apiserver", daemon=True)
        self.thread.start()
        self.server: FakeApiServer = self.call(FakeApiServer)
        if kube_version is not None:
            self.call(lambda: setattr(self.server, "kube_version", kube_version))
        self.run(self.server.start())

    def call(self, function: Callable[[], T]) -> T:
        """``function()`` on the server's loop; its value."""
        future: Future[T] = Future()

        def answer() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # handed to the caller, raised there
                future.set_exception(error)

        self.loop.call_soon_threadsafe(answer)
        return future.result(API_WAIT)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """``coroutine`` run to its end on the server's loop; its value."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(API_WAIT)

    def add_node(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """A Node object for a plugin's NODE_NAME."""
        self.call(lambda: self.server.add_node(name, labels))

    def has_configmap(self, name: str) -> bool:
        """Whether the ConfigMap ``name`` of kube-system is stored."""
        return self.call(lambda: self.server.get("configmaps", name, "kube-system") is not None)

    def devices(self, driver: str, node: str) -> list[str]:
        """The names of the devices ``driver`` publishes for ``node`` in its ResourceSlices now."""
        slices = self.call(lambda: self.server.slices(driver, node))
        return [device["name"] for s in slices for device in s["spec"].get("devices") or []]

    def stop(self) -> None:
        self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(API_WAIT)
        self.loop.close()


class CFakePlugin:
    """A plugin process on the real binding over the C fake libdcmi.so, and a kubelet stand-in.

    The scenario is the fake library's line format (tests/fake_dcmi/scenario_file.py);
    ``write(scenario)`` replaces it while the plugin runs.
    """

    def __init__(self, library: Path, scenario: Any, *extra: str) -> None:
        from fake_dcmi.scenario_file import SCENARIO_ENV

        from ascend_plugin.testing.kubelet_standin import KubeletStandIn

        self.work = Workspace.create()
        self.scenario = self.work.root / "scenario.txt"
        self.write(scenario)
        self.kubelet = KubeletStandIn(self.work.plugin_dir)
        self.kubelet.start()
        self.plugin = self.work.start_plugin(
            "--backend", "dcmi", "--dcmi-library", str(library), "--dcmi-allow-untrusted-library", *extra,
            env={SCENARIO_ENV: str(self.scenario)},
        )  # fmt: skip
        self.kubelet.wait_until(lambda k: any(v.updates for v in k.resources.values()), 60, "registration")

    def write(self, scenario: Any) -> None:
        """Replace the fake library's scenario (a FakeScenario)."""
        from fake_dcmi.scenario_file import write_scenario

        write_scenario(self.scenario, scenario)

    def stop(self) -> None:
        self.plugin.terminate()
        self.plugin.wait(timeout=30)
        self.kubelet.stop()
