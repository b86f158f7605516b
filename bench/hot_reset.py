"""Hot reset, measured end to end: fault -> reset call, and chip back -> group Healthy at the kubelet.

Run: ``python bench/hot_reset.py`` (or ``nox -s bench``). The plugin runs as its
own process on the real cffi binding over the C fake library (tests/fake_dcmi),
in Volcano mode (where it knows which chips pods hold) against the loopback API
server, with the kubelet stand-in and its PodResources API, at the default
health interval (1 s). The node is eight 910B3 chips, one reset group; each
reset takes the fake ``--reset-seconds`` plus a random part of the boot-status
poll (0.25 s), so the end of a reset falls anywhere between two polls. Each trial faults one chip (a
RestartNPU code, by the fault-level file) and times, on the system's monotonic
clock that the fake driver stamps its resets with:

* **fault -> reset call**, the group free all along, for ``hot_reset_idle`` 0
  and ``--idle`` [target: <= idle + 2 s];
* **group free -> reset call**: the fault comes while another chip of the
  group has a process, which ends a moment later [target: <= idle + 2 s];
* **chip back -> group Healthy**: from the end of the chip's reset window
  (its boot status 16) until the kubelet has all eight Healthy again
  [target: <= 2 s].

Trials rotate over the chips: the budget is three resets per chip in 6 hours.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from common import ApiServerThread, Workspace, percentile, print_command

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario
from pod_resources_standin import PodResourcesStandIn

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.fake.driver_state import DriverStateFile

NODE = "bench-node"
RESOURCE = "huawei.com/Ascend910"
CHIPS = 8
CODE = "80C98009"  # RestartNPU, by the fault-level file below
BUSY = 5  # the chip that has a process while the fault comes, in the "group free" trials


def scenario(reset_seconds: float, faulty: int | None = None, busy: bool = False) -> FakeScenario:
    chips = [
        {
            "phy_id": phy,
            "card_id": phy,
            "health": 2 if phy == faulty else 0,
            "fault_codes": [CODE] if phy == faulty else [],
            "processes": [{"pid": 4242}] if busy and phy == BUSY else [],
        }
        for phy in range(CHIPS)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "reset_seconds": reset_seconds, "chips": chips})


class ResetNode:
    """A plugin process with hot reset on, over the C fake, with its kubelet, PodResources and API server."""

    def __init__(self, library: Path, idle: float, reset_seconds: float) -> None:
        self.reset_seconds = reset_seconds
        self.work = Workspace.create()
        self.scenario = self.work.root / "scenario.txt"
        write_scenario(self.scenario, scenario(reset_seconds))
        levels = self.work.root / "levels.json"
        levels.write_text(json.dumps({"RestartNPU": [CODE]}))
        self.api = ApiServerThread()
        self.api.add_node(NODE, {"kubernetes.io/hostname": NODE})
        kubeconfig = self.api.server.write_kubeconfig(self.work.root / "kubeconfig")
        self.kubelet = KubeletStandIn(self.work.plugin_dir)
        self.kubelet.start()
        self.pod_resources = PodResourcesStandIn(self.kubelet, self.work.root / "pod-resources.sock")
        self.pod_resources.start()
        self.plugin = self.work.start_plugin(
            "--backend", "dcmi", "--dcmi-library", str(library), "--dcmi-allow-untrusted-library",
            "--volcano", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
            "--pod-resources-socket", str(self.pod_resources.socket), "--host-ip", "198.51.100.7",
            "--no-node-labels", "--no-device-info-configmap", "--no-node-events",
            "--fault-levels-file", str(levels), "--hot-reset", "--hot-reset-idle", str(idle),
            "--log-level", "ERROR",
            env={SCENARIO_ENV: str(self.scenario)},
        )  # fmt: skip
        self.kubelet.wait_until(
            lambda k: RESOURCE in k.resources and k.resources[RESOURCE].updates > 0, 60, "up"
        )

    def write(self, value: FakeScenario) -> None:
        write_scenario(self.scenario, value)

    def reset_of(self, phy: int, count: int) -> int | None:
        """When the driver began the chip's reset number ``count`` (monotonic ns), once it did."""
        state = DriverStateFile.beside(self.scenario).read()
        reset = next((r for r in state.resets if r.phy_id == phy and r.count >= count), None)
        return reset.since_ns if reset is not None else None

    def all_healthy_after(self, moment: float) -> float | None:
        """The first time after ``moment`` the kubelet had every chip Healthy."""
        history = list(self.kubelet.resources[RESOURCE].history)
        for at, devices in history:
            if at >= moment and len(devices) == CHIPS and set(devices.values()) == {"Healthy"}:
                return at
        return None

    def stop(self) -> None:
        self.plugin.terminate()
        self.plugin.wait(timeout=30)
        self.pod_resources.stop()
        self.kubelet.stop()
        self.api.stop()


T = TypeVar("T")


def until(condition: Callable[[], T | None], what: str, within: float = 300.0) -> T:
    """``condition()``'s first value that is not None, looked at every 2 ms."""
    deadline = time.monotonic() + within
    while (value := condition()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.002)
    return value


@contextmanager
def node(library: Path, idle: float, reset_seconds: float) -> Iterator[ResetNode]:
    running = ResetNode(library, idle, reset_seconds)
    try:
        yield running
    finally:
        running.stop()


def trials(node: ResetNode, count: int, rng: random.Random, busy: bool) -> tuple[list[float], list[float]]:
    """``count`` resets, each of the next chip in turn: (free -> reset call, chip back -> all Healthy)."""
    to_call, to_healthy = [], []
    for trial in range(count):
        reset_seconds = node.reset_seconds + rng.uniform(0, 0.25)
        phy = trial % CHIPS
        if phy == BUSY and busy:
            phy = (phy + 1) % CHIPS
        nth = trial // CHIPS + 1
        time.sleep(rng.uniform(0, 1.0))  # a random moment of the 1 s poll cycle
        node.write(scenario(reset_seconds, phy, busy=busy))
        free = time.monotonic()
        if busy:
            time.sleep(rng.uniform(0.5, 1.5))  # the fault is seen while chip BUSY has its process
            node.write(scenario(reset_seconds, phy))
            free = time.monotonic()
        since = until(lambda phy=phy, nth=nth: node.reset_of(phy, nth), f"reset {nth} of chip {phy}")
        started = since / 1e9
        to_call.append(started - free)
        back = started + reset_seconds
        healthy = until(lambda back=back: node.all_healthy_after(back), "the group Healthy again")
        to_healthy.append(healthy - back)
    return to_call, to_healthy


def describe_s(name: str, seconds: list[float]) -> str:
    return (
        f"{name}: n={len(seconds)} p50={statistics.median(seconds):.3f} s "
        f"p90={percentile(seconds, 0.9):.3f} s max={max(seconds):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=12, help="resets per configuration")
    parser.add_argument("--idle", type=float, default=3.0, help="the hot_reset_idle of the second run")
    parser.add_argument("--reset-seconds", type=float, default=2.0, help="how long the fake's reset takes")
    args = parser.parse_args()
    rng = random.Random(11)
    library = build_fake_library()
    print_command()
    for idle in (0.0, args.idle):
        for busy in (False, True):
            with node(library, idle, args.reset_seconds) as running:
                to_call, to_healthy = trials(running, args.trials, rng, busy)
            start = "group freed (a process on another chip ended)" if busy else "fault written (group free)"
            print(describe_s(f"idle {idle:g} s: {start} -> reset call", to_call))
            print(
                describe_s(
                    f"idle {idle:g} s: {start} -> reset call, less the idle time", [t - idle for t in to_call]
                )
            )
            print(
                describe_s(f"idle {idle:g} s: chip back (boot status 16) -> all {CHIPS} Healthy", to_healthy)
            )


if __name__ == "__main__":
    main()
