"""A fault-event storm and a flapping chip, measured on a plugin process: log lines, memory, API writes.

Run: ``python bench/event_storm.py`` (or ``nox -s bench``). Each part runs on both fakes: ``fake``, the
pure-Python fake backend, and ``dcmi``, the real cffi binding over the C fake libdcmi.so of
tests/fake_dcmi, whose events reach the plugin through the real C callback on the library's own thread.

* The storm: a 910B3 server of 8 chips, default settings, logging at INFO in JSON. Six chips get a
  storm of fault events from the driver, together ``--rate`` events a second (10,000) for
  ``--seconds`` (10); two get none. Chips 0 and 1 flap a SeparateNPU code (raised, recovered, ...)
  and end recovered; chips 2 and 3 flap it and end raised; chips 4 and 5 flap it and a RestartNPU
  code interleaved, the first ending raised, the second recovered. Measured: the lines the plugin
  logged from the storm's start until its health converged (target <= 300), its RSS before, at its
  peak and after (growth target <= 30 MiB), its CPU time, the ListAndWatch updates the kubelet
  stand-in received, and how long after the last event the kubelet saw the truth: chips 2-5
  Unhealthy, 6 and 7 Healthy throughout, 0 and 1 Healthy once flap damping releases them (the hold is
  30 s from the last unhealthy verdict).
* The flapping chip: the same server with the Kubernetes side on (the loopback API server of
  ascend_plugin/testing/kube_apiserver.py, through the plugin's real kubernetes-asyncio client); chip 0's
  fault code is raised and cleared every ``--flap-period``/2 seconds for ``--flap-seconds`` (20).
  Damping holds the chip out after its third spell. Measured: writes of the device-info ConfigMap
  while it flaps (target <= 4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import ApiServerThread, Workspace, cpu_seconds, print_command, rss_mib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

from ascend_plugin.testing.kube_apiserver import Recorded
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

RESOURCE = "huawei.com/Ascend910"
SEPARATE = "80E01801"  # SeparateNPU
RESTART = "40F84E00"  # RestartNPU
CHIPS = 8
WAIT = 120.0  # seconds any one step may take before the bench gives up
SETTLE = 3.0  # seconds after the subscription before the baseline RSS is read
RAISE, RECOVER = 1, 0


def _flap(code: str) -> list[dict[str, Any]]:
    """Raise and recover ``code`` in turn; the storm's count decides which comes last."""
    return [{"code": code, "assertion": RAISE}, {"code": code, "assertion": RECOVER}]


def storms(rate: float, seconds: float) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """The storm of each chip (by physical id) and the health each chip must end in."""
    per_chip = rate / 6
    count = int(per_chip * seconds)
    even, odd = count - count % 2, count - count % 2 + 1  # raised first: even ends recovered, odd raised
    # Four steps: SEPARATE raised, RESTART raised, SEPARATE recovered, RESTART recovered. A count of
    # 4k + 1 ends on SEPARATE raised after RESTART recovered (k whole cycles, then one more raise).
    mixed = [
        {"code": SEPARATE, "assertion": RAISE},
        {"code": RESTART, "assertion": RAISE},
        {"code": SEPARATE, "assertion": RECOVER},
        {"code": RESTART, "assertion": RECOVER},
    ]
    mixed_count = count - count % 4 + 1
    chips = {
        0: (even, _flap(SEPARATE)),
        1: (even, _flap(SEPARATE)),
        2: (odd, _flap(SEPARATE)),
        3: (odd, _flap(SEPARATE)),
        4: (mixed_count, mixed),
        5: (mixed_count, mixed),
    }
    storm = {
        phy: {"serial": 1, "rate": per_chip, "count": total, "steps": steps}
        for phy, (total, steps) in chips.items()
    }
    truth = {phy: "Unhealthy" if phy in (2, 3, 4, 5) else "Healthy" for phy in range(CHIPS)}
    return storm, truth


def server(edits: dict[int, dict[str, Any]] | None = None) -> FakeScenario:
    chips = [{"phy_id": n, "card_id": n + 1, **(edits or {}).get(n, {})} for n in range(CHIPS)]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


class Node:
    """A plugin process on one fake, its JSON log in a file, with a kubelet stand-in."""

    def __init__(self, backend: str, library: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.work = Workspace.create()
        self.lines = self.work.root / "scenario.txt"
        self.log_path = self.work.root / "plugin.log"
        self.write(server())
        self.kubelet = KubeletStandIn(self.work.plugin_dir)
        self.kubelet.start()
        flags = ["--log-level", "INFO", "--log-format", "json", *extra]
        environment = dict(env or {})
        if backend == "dcmi":
            flags += ["--backend", "dcmi", "--dcmi-library", str(library), "--dcmi-allow-untrusted-library"]
            environment[SCENARIO_ENV] = str(self.lines)
        self._log = self.log_path.open("wb")
        self.plugin = self.work.start_plugin(*flags, env=environment, stderr=self._log)
        self.kubelet.wait_until(lambda k: self.updates > 0, WAIT, "registration")
        self.wait_for_line(lambda line: line["msg"].startswith("subscribed to fault events"), "subscription")

    @property
    def updates(self) -> int:
        view = self.kubelet.resources.get(RESOURCE)
        return view.updates if view is not None else 0

    def write(self, scenario: FakeScenario) -> None:
        if self.backend == "dcmi":
            write_scenario(self.lines, scenario)
        else:
            self.work.write_scenario(json.loads(scenario.model_dump_json()))

    def log(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def wait_for_line(self, found: Callable[[dict[str, Any]], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not any(found(line) for line in self.log()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.backend}: no log line for {what} within {WAIT:g} s")
            time.sleep(0.1)

    def health(self) -> dict[int, str]:
        return {
            int(device.rsplit("-", 1)[1]): state for device, state in self.kubelet.health(RESOURCE).items()
        }

    def stop(self) -> None:
        self.plugin.terminate()
        self.plugin.wait(timeout=30)
        self.kubelet.stop()
        self._log.close()
        shutil.rmtree(self.work.root, ignore_errors=True)


def storm_run(backend: str, library: Path, rate: float, seconds: float) -> None:
    storm, truth = storms(rate, seconds)
    node = Node(backend, library)
    try:
        time.sleep(SETTLE)
        rss_before, cpu_before = rss_mib(node.plugin.pid), cpu_seconds(node.plugin.pid)
        lines_before, updates_before = len(node.log()), node.updates
        peak = rss_before
        node.write(server({phy: {"storm": chip_storm} for phy, chip_storm in storm.items()}))
        started = time.monotonic()
        last_event = started + seconds
        converged: float | None = None
        unhealthy_controls: set[int] = set()
        while time.monotonic() < last_event + WAIT:
            peak = max(peak, rss_mib(node.plugin.pid))
            health = node.health()
            unhealthy_controls |= {phy for phy in (6, 7) if health.get(phy) != "Healthy"}
            if time.monotonic() > last_event and health == truth:
                converged = time.monotonic()
                break
            time.sleep(0.05)
        if converged is None:
            raise TimeoutError(f"{backend}: health never converged: {node.health()} (truth {truth})")
        cpu = cpu_seconds(node.plugin.pid) - cpu_before
        rss_after = rss_mib(node.plugin.pid)
        log = node.log()[lines_before:]
        updates = node.updates - updates_before
    finally:
        node.stop()
    events = sum(chip_storm["count"] for chip_storm in storm.values())
    accounted = sum(line.get("events", 0) + line.get("suppressed", 0) for line in log if "codes" in line)
    print(
        f"{backend:<5}  {events:>7}  {len(log):>5}  {accounted:>9}  {rss_before:>7.1f}  {peak:>7.1f}  "
        f"{rss_after:>7.1f}  {rss_after - rss_before:>+7.1f}  {cpu:>6.1f}  {updates:>7}  "
        f"{converged - last_event:>12.1f}  {'yes' if not unhealthy_controls else 'NO'}"
    )


def _writes(api: ApiServerThread) -> list[Recorded]:
    """The ConfigMap writes the API server took so far."""
    return api.call(
        lambda: [
            request
            for request in api.server.requests
            if request.resource == "configmaps"
            and request.verb in ("create", "update")
            and request.status < 300
        ]
    )


def flap_run(backend: str, library: Path, api: ApiServerThread, seconds: float, period: float) -> None:
    node_name = f"storm-{backend}"
    api.add_node(node_name)
    kubeconfig = api.server.write_kubeconfig(Path(f"/tmp/{node_name}.kubeconfig"))
    node = Node(backend, library, "--kubeconfig", str(kubeconfig), env={"NODE_NAME": node_name})
    try:
        deadline = time.monotonic() + WAIT
        while not _writes(api):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{backend}: no device-info ConfigMap within {WAIT:g} s")
            time.sleep(0.05)
        before = len(_writes(api))
        started, flips = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            faulty = flips % 2 == 0
            node.write(server({0: {"fault_codes": [SEPARATE] if faulty else []}}))
            flips += 1
            time.sleep(period / 2)
        writes = _writes(api)[before:]
        held = node.health().get(0)
    finally:
        node.stop()
        kubeconfig.unlink(missing_ok=True)
    print(
        f"{backend:<5}  {seconds:>4g} s  {flips:>5}  {len(writes):>6}  {held}  "
        f"[{', '.join(f'{write.at - started:.1f}' for write in writes)}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=10_000.0, help="storm events a second, all chips")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the storm lasts")
    parser.add_argument("--flap-seconds", type=float, default=20.0, help="how long chip 0 flaps")
    parser.add_argument("--flap-period", type=float, default=1.0, help="seconds of one fault-and-clear")
    parser.add_argument("--backends", nargs="+", default=["fake", "dcmi"], choices=["fake", "dcmi"])
    args = parser.parse_args()
    library = build_fake_library()
    print_command()
    print(
        f"storm: {args.rate:g} events/s for {args.seconds:g} s on 6 of 8 chips (910B3); lines, RSS (MiB), "
        "CPU (s) and ListAndWatch updates from the storm's start until health converged"
    )
    print(
        "backend  events  lines  accounted  RSS-pre  RSS-max  RSS-end   growth  CPU s  updates  "
        "converged s  controls healthy"
    )
    for backend in args.backends:
        storm_run(backend, library, args.rate, args.seconds)
    print(f"flapping chip 0 (period {args.flap_period:g} s) under damping: device-info ConfigMap writes")
    print("backend  flapped  flips  writes  chip 0  [seconds into the flapping of each write]")
    api = ApiServerThread()
    try:
        for backend in args.backends:
            flap_run(backend, library, api, args.flap_seconds, args.flap_period)
    finally:
        api.stop()


if __name__ == "__main__":
    main()
