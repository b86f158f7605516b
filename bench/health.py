"""Health, measured end to end: fault injected in the fake libdcmi.so -> Unhealthy at the kubelet, and back.

Run: ``python bench/health.py`` (or ``nox -s bench``). The plugin runs as its
own process on the real cffi binding over the C fake library (tests/fake_dcmi),
at the default health interval (1 s). Each injection rewrites the fake's
scenario file at a random moment of the poll cycle; the kubelet stand-in
(grpcio) sees the ListAndWatch update. Three measurements:

* polled detection and recovery, on a 310P card pair (no fault subscription);
* subscribed detection and recovery, on a 910B server (fault events);
* idle CPU of the plugin with 16 chips polled every second.

Flap damping is lifted for the injections (a chip faulting fifty times a
minute would otherwise be held unhealthy, as it should be).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from common import Workspace, cpu_seconds, describe_ms, print_command, rss_mib

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

FAULT = "80E01801"  # SeparateNPU


def _scenario(chip_name: str, chips: int, faulty: bool) -> FakeScenario:
    return FakeScenario.model_validate(
        {
            "chip_name": chip_name,
            "chips": [
                {"phy_id": n, "card_id": n // 2 + 1, "fault_codes": [FAULT] if faulty and n == 0 else []}
                for n in range(chips)
            ],
        }
    )


class Node:
    """A plugin process on the C fake library, with a kubelet stand-in."""

    def __init__(self, chip_name: str, chips: int, library: Path, *extra: str) -> None:
        self.chip_name, self.chips = chip_name, chips
        self.work = Workspace.create()
        self.scenario = self.work.root / "scenario.txt"
        write_scenario(self.scenario, _scenario(chip_name, chips, faulty=False))
        self.kubelet = KubeletStandIn(self.work.plugin_dir)
        self.kubelet.start()
        self.plugin = self.work.start_plugin(
            "--backend", "dcmi", "--dcmi-library", str(library), "--dcmi-allow-untrusted-library", *extra,
            env={SCENARIO_ENV: str(self.scenario)},
        )  # fmt: skip
        self.resource = ""
        self.kubelet.wait_until(lambda k: any(v.updates for v in k.resources.values()), 60, "registration")
        self.resource = next(iter(self.kubelet.resources))
        self.first_device = sorted(self.kubelet.health(self.resource))[0]

    def health(self) -> Any:
        return self.kubelet.health(self.resource).get(self.first_device)

    def flip(self, faulty: bool) -> float:
        """Write the scenario and return the seconds until the kubelet sees the new health."""
        wanted = "Unhealthy" if faulty else "Healthy"
        started = time.monotonic()
        write_scenario(self.scenario, _scenario(self.chip_name, self.chips, faulty))
        self.kubelet.wait_until(lambda k: self.health() == wanted, 30, wanted)
        return time.monotonic() - started

    def stop(self) -> None:
        self.plugin.terminate()
        self.plugin.wait(timeout=30)
        self.kubelet.stop()


def injections(node: Node, count: int, rng: random.Random) -> tuple[list[float], list[float]]:
    detect, recover = [], []
    for _ in range(count):
        time.sleep(rng.uniform(0, 1.0))  # a random moment of the 1 s poll cycle
        detect.append(node.flip(faulty=True))
        time.sleep(rng.uniform(0, 1.0))
        recover.append(node.flip(faulty=False))
    return detect, recover


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--injections", type=int, default=50)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    args = parser.parse_args()
    rng = random.Random(7)
    library = build_fake_library()
    print_command()

    for label, chip_name, chips in (
        ("polled (310P3 pair)", "310P3", 2),
        ("subscribed (910B3, 8 chips)", "910B3", 8),
    ):
        # Fifty faults a minute are flapping by any measure; lift the damping so
        # that recovery measures the plugin, not the hold time it would impose.
        node = Node(chip_name, chips, library, "--health-flap-threshold", "100")
        try:
            detect, recover = injections(node, args.injections, rng)
        finally:
            node.stop()
        print(describe_ms(f"{label}: fault -> Unhealthy at the kubelet", detect))
        print(describe_ms(f"{label}: clear -> Healthy at the kubelet", recover))

    node = Node("310P3", 16, library)
    try:
        time.sleep(3)  # start-up work done
        cpu_before, wall_before = cpu_seconds(node.plugin.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        cpu = cpu_seconds(node.plugin.pid) - cpu_before
        wall = time.monotonic() - wall_before
        rss = rss_mib(node.plugin.pid)
    finally:
        node.stop()
    print(
        f"idle, 16 chips polled every 1 s: CPU {100 * cpu / wall:.2f}% of one core over {wall:.0f} s "
        f"({1000 * cpu / wall / 16:.2f} ms CPU per chip-second), RSS {rss:.1f} MiB"
    )


if __name__ == "__main__":
    main()
