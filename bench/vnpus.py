"""Static vNPUs, measured: how fast a live change reaches the kubelet, and what re-reading them costs.

Run: ``python bench/vnpus.py`` (or ``nox -s bench``). The plugin runs as its own
process on the real cffi binding over the C fake library (tests/fake_dcmi), at
the default health interval (1 s), on a 910B3 box of 16 chips. Each change
rewrites the fake's scenario file at a random moment of the poll cycle and the
kubelet stand-in (grpcio) sees it:

* a vNPU destroyed and re-created while another of its template stays: its ID
  leaves and joins the resource (a ListAndWatch update);
* the last vNPU of a template destroyed and re-created: the resource's server
  stops and the kubelet drops it, then a new server registers it;
* idle CPU with every chip split into two vNPUs, against the same node with
  ``--vnpu off``: the price of listing every chip's vNPUs each poll.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from common import CFakePlugin, cpu_seconds, describe_ms, print_command

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_dcmi.build import build_fake_library

from backends.fake import FakeScenario

CHIPS = 16
SPLIT = "huawei.com/Ascend910-10c.3cpu.32g"
LONE = "huawei.com/Ascend910-12c.3cpu.32g"


def _scenario(second_vnpu: bool, lone_vnpu: bool) -> FakeScenario:
    """Every chip split into two vir10_3c_32g, except that chip 0 may lack its second, and chip 15
    carries a vir12_3c_32g (the only one of its template) instead when ``lone_vnpu``."""
    chips: list[dict[str, Any]] = []
    for phy in range(CHIPS):
        vdevs = [{"vdev_id": 100 + 2 * phy, "template": "vir10_3c_32g"}]
        if phy != 0 or second_vnpu:
            vdevs.append({"vdev_id": 101 + 2 * phy, "template": "vir10_3c_32g"})
        if phy == CHIPS - 1 and lone_vnpu:
            vdevs = [{"vdev_id": 100 + 2 * phy, "template": "vir12_3c_32g"}]
        chips.append({"phy_id": phy, "card_id": phy + 1, "vdevs": vdevs})
    return FakeScenario.model_validate({"chip_name": "910B3", "memory_mb": 65536, "chips": chips})


class Node(CFakePlugin):
    """A plugin process on the C fake library whose vNPUs the benchmark destroys and creates."""

    def __init__(self, library: Path, *extra: str) -> None:
        self.state = {"second_vnpu": True, "lone_vnpu": True}
        super().__init__(library, _scenario(**self.state), *extra)

    def change(self, key: str, value: bool, seen: Any) -> float:
        """Rewrite the scenario; the seconds until ``seen(kubelet)`` holds."""
        self.state[key] = value
        started = time.monotonic()
        self.write(_scenario(**self.state))
        self.kubelet.wait_until(seen, 30, f"{key}={value}")
        return time.monotonic() - started


def _registered(resource: str) -> Any:
    return lambda k: resource in k.node_capacity() and k.resources[resource].updates > 0


def changes(node: Node, count: int, rng: random.Random) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {
        "id leaves": [],
        "id joins": [],
        "resource dropped": [],
        "resource back": [],
    }
    second = "Ascend910-10c.3cpu.32g-101-0"
    for _ in range(count):
        time.sleep(rng.uniform(0, 1.0))  # a random moment of the 1 s poll cycle
        figures["id leaves"].append(
            node.change("second_vnpu", False, lambda k: second not in k.health(SPLIT))
        )
        time.sleep(rng.uniform(0, 1.0))
        figures["id joins"].append(node.change("second_vnpu", True, lambda k: second in k.health(SPLIT)))
        time.sleep(rng.uniform(0, 1.0))
        figures["resource dropped"].append(
            node.change("lone_vnpu", False, lambda k: LONE not in k.node_capacity())
        )
        time.sleep(rng.uniform(0, 1.0))
        figures["resource back"].append(node.change("lone_vnpu", True, _registered(LONE)))
    return figures


def idle_cpu(library: Path, seconds: float, *extra: str) -> float:
    """Percent of one core the idle plugin uses on the split node."""
    node = Node(library, *extra)
    try:
        time.sleep(3)  # start-up work done
        cpu_before, wall_before = cpu_seconds(node.plugin.pid), time.monotonic()
        time.sleep(seconds)
        return 100 * (cpu_seconds(node.plugin.pid) - cpu_before) / (time.monotonic() - wall_before)
    finally:
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    rng = random.Random(17)
    library = build_fake_library()
    print_command()

    node = Node(library)
    try:
        figures = changes(node, args.changes, rng)
    finally:
        node.stop()
    for name, values in figures.items():
        print(describe_ms(f"910B3 box, 16 chips x 2 vNPUs: {name} at the kubelet", values))

    static = idle_cpu(library, args.idle_seconds)
    off = idle_cpu(library, args.idle_seconds, "--vnpu", "off")
    print(
        f"idle, 16 chips polled every 1 s: CPU {static:.2f}% of one core reading vNPUs each poll, "
        f"{off:.2f}% with --vnpu off"
    )


if __name__ == "__main__":
    main()
