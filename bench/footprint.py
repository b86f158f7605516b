"""The idle plugin's footprint: resident memory, CPU, and process start to registered.

Run: ``python bench/footprint.py`` (or ``nox -s bench``). One plugin process per
configuration: 1 chip (a 310B1 board), 16 and 256 chips (910B3, four per card
as DCMI numbers them), each with the Kubernetes side off (no NODE_NAME) and on
(NODE_NAME and --kubeconfig pointing at the loopback API server of
tests/kube_apiserver.py, run by this script); health is polled every second,
and the HTTP endpoint serves, as deployed. Each runs on two chip libraries:

* ``fake``: the pure-Python fake backend. Its own bookkeeping is slow (it
  re-derives the whole node on every call), so at 256 chips its CPU figure is
  mostly the fake's, not the plugin's.
* ``dcmi``: the real cffi binding over the C fake libdcmi.so of tests/fake_dcmi,
  whose calls cost what a driver's cheapest calls would: the plugin's own cost.

The plugins start one after another, so start-up times do not compete; then all
idle together for one window, over which each one's CPU time is read from
/proc (per process, so running them side by side does not mix the figures).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import ApiServerThread, Workspace, cpu_seconds, print_command, rss_mib

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

from backends.fake import FakeScenario

WAIT = 60.0  # seconds any one start-up step may take before the bench gives up
SETTLE = 5.0  # seconds after the last start before the window opens: initial writes, lazy imports
CHIPS_PER_CARD = 4  # the fake scenario's device ids run 0..3 per card


@dataclass(frozen=True)
class Config:
    backend: str  # "fake" or "dcmi"
    chips: int
    kube: bool

    @property
    def chip_name(self) -> str:
        return "310B1" if self.chips == 1 else "910B3"

    @property
    def resource(self) -> str:
        return "huawei.com/Ascend310" if self.chips == 1 else "huawei.com/Ascend910"

    @property
    def node(self) -> str:
        return f"bench-{self.backend}-{self.chips}-{'kube' if self.kube else 'nokube'}"


@dataclass
class Run:
    config: Config
    work: Workspace
    kubelet: KubeletStandIn
    plugin: Any  # subprocess.Popen[bytes]
    to_registered: float = 0.0
    to_configmap: float | None = None
    cpu_before: float = 0.0
    cpu_percent: float = 0.0
    rss: float = 0.0
    peak_rss: float = 0.0


def peak_rss_mib(pid: int) -> float:
    """The most resident memory the process has had, in MiB (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def scenario(config: Config) -> dict[str, Any]:
    chips = [
        {"phy_id": phy, "card_id": phy // CHIPS_PER_CARD, "device_id": phy % CHIPS_PER_CARD}
        for phy in range(config.chips)
    ]
    return {"chip_name": config.chip_name, "chips": chips}


def start(config: Config, api: ApiServerThread, c_library: Path) -> Run:
    """One plugin, waited for until registered (and, with kube on, until its ConfigMap is written)."""
    work = Workspace.create()
    work.write_scenario(scenario(config))
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    # Later flags win over start_plugin's: the endpoint serves, only errors are logged.
    extra = ["--health-interval", "1", "--http-address", "127.0.0.1:0", "--log-level", "ERROR"]
    env: dict[str, str] = {}
    if config.backend == "dcmi":
        lines = write_scenario(work.root / "scenario.txt", FakeScenario.model_validate(scenario(config)))
        extra += ["--backend", "dcmi", "--dcmi-library", str(c_library), "--dcmi-allow-untrusted-library"]
        env[SCENARIO_ENV] = str(lines)
    if config.kube:
        api.add_node(config.node)
        extra += ["--kubeconfig", str(api.server.write_kubeconfig(work.root / "kubeconfig"))]
        env["NODE_NAME"] = config.node
    started = time.monotonic()
    run = Run(config, work, kubelet, work.start_plugin(*extra, env=env))
    kubelet.wait_until(
        lambda k: config.resource in k.resources and k.resources[config.resource].updates > 0,
        WAIT,
        f"registration of {config}",
    )
    run.to_registered = kubelet.registrations[0].at - started
    if config.kube:
        name = f"mindx-dl-deviceinfo-{config.node}"
        deadline = started + WAIT
        while not api.has_configmap(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{config}: no device-info ConfigMap within {WAIT} s")
            time.sleep(0.01)
        run.to_configmap = time.monotonic() - started
    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", type=float, default=20.0, help="seconds of idle CPU measured")
    parser.add_argument("--chips", type=int, nargs="+", default=[1, 16, 256])
    args = parser.parse_args()

    c_library = build_fake_library()
    api = ApiServerThread()
    runs: list[Run] = []
    try:
        for backend in ("fake", "dcmi"):
            for chips in args.chips:
                for kube in (False, True):
                    runs.append(start(Config(backend, chips, kube), api, c_library))
        time.sleep(SETTLE)
        for run in runs:
            run.cpu_before = cpu_seconds(run.plugin.pid)
        time.sleep(args.window)
        for run in runs:
            run.cpu_percent = (cpu_seconds(run.plugin.pid) - run.cpu_before) / args.window * 100
            run.rss, run.peak_rss = rss_mib(run.plugin.pid), peak_rss_mib(run.plugin.pid)
    finally:
        for run in runs:
            run.plugin.terminate()
        for run in runs:
            run.plugin.wait(timeout=30)
            run.kubelet.stop()
            shutil.rmtree(run.work.root, ignore_errors=True)
        api.stop()

    print_command()
    print(f"idle window {args.window:g} s after {SETTLE:g} s of settling; health every 1 s; HTTP endpoint on")
    print(
        f"{'backend':<7}  {'chips':>5}  {'kube':<4}  {'start->registered':>17}  {'start->ConfigMap':>16}  "
        f"{'RSS MiB':>7}  {'peak RSS MiB':>12}  {'idle CPU % of a core':>20}"
    )
    for run in runs:
        configmap = f"{run.to_configmap * 1000:.0f} ms" if run.to_configmap is not None else "-"
        print(
            f"{run.config.backend:<7}  {run.config.chips:>5}  {'on' if run.config.kube else 'off':<4}  "
            f"{run.to_registered * 1000:>14.0f} ms  {configmap:>16}  {run.rss:>7.1f}  {run.peak_rss:>12.1f}  "
            f"{run.cpu_percent:>20.2f}"
        )


if __name__ == "__main__":
    main()
