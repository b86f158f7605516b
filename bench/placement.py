"""GetPreferredAllocation's answer, timed: the topology rules on a 16-chip node and an 8-chip ring server.

Run: ``python bench/placement.py`` (or ``nox -s bench``). Each node gets many
random requests shaped like the kubelet's: a random free set, a size up to what
is free, sometimes a must-include device. Only the pure answer is timed
(``NodeTopology.preferred``), the part the gRPC handler adds to a call; the
issue's budget is p99 <= 2 ms on a 16-chip node. Building the topology (once
per change of the offered devices) is timed too.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from common import describe_ms, print_command

from ascend_plugin.offers.placement import DevicePlace, NodeTopology
from backends.families import family_named
from backends.library import ChipInfo
from backends.topology import ChipFacts, assign_units

NumaOf = Callable[[int], int]


def _node(
    chip_name: str,
    family: str,
    chips: int,
    card_of: Callable[[int], int],
    numa_of: NumaOf,
    *,
    shares: int = 1,
) -> list[DevicePlace]:
    kind = family_named(family).for_chip(ChipInfo("Ascend", chip_name, "V1", 0)).unit_kind
    units = assign_units(ChipFacts(phy, card_of(phy), kind) for phy in range(chips))
    return [
        DevicePlace(f"npu-{phy}-{share}", phy, units[phy], numa_of(phy))
        for phy in range(chips)
        for share in range(shares)
    ]


NODES: dict[str, list[DevicePlace]] = {
    "910B3 box, 16 chips (two mesh groups of 8, 4 NUMA nodes)": _node(
        "910B3", "910", 16, lambda phy: phy, lambda phy: phy // 4
    ),
    "A3, 16 dies (8 modules of 2, 2 NUMA nodes)": _node(
        "Ascend910", "910", 16, lambda phy: phy // 2, lambda phy: phy // 8
    ),
    "Atlas 300I x4, 16 chips (cards of 4, 2 NUMA nodes)": _node(
        "310", "310", 16, lambda phy: phy // 4, lambda phy: phy // 8
    ),
    "910A server, 8 chips (two HCCS rings, 2 NUMA nodes)": _node(
        "910A", "910", 8, lambda phy: phy, lambda phy: phy // 4
    ),
    "910B3 box, 16 chips x 4 shares (64 devices)": _node(
        "910B3", "910", 16, lambda phy: phy, lambda phy: phy // 4, shares=4
    ),
}


def _requests(
    places: list[DevicePlace], count: int, rng: random.Random
) -> list[tuple[list[str], list[str], int]]:
    ids = [place.id for place in places]
    requests = []
    for _ in range(count):
        free = [device_id for device_id in ids if rng.random() < 0.7] or ids[:1]
        rng.shuffle(free)
        size = rng.randint(1, len(free))
        must = rng.sample(free, min(size, rng.choice((0, 0, 0, 1, 2))))
        requests.append((free, must, size))
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="random requests per node")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print_command()
    for name, places in NODES.items():
        builds = []
        for _ in range(200):
            started = time.perf_counter()
            topology = NodeTopology(places)
            builds.append(time.perf_counter() - started)
        answers = []
        for available, must, size in _requests(places, args.requests, rng):
            started = time.perf_counter()
            topology.preferred(available, must, size)
            answers.append(time.perf_counter() - started)
        print(name)
        print("  " + describe_ms("preferred allocation", answers))
        print("  " + describe_ms("topology build", builds))


if __name__ == "__main__":
    main()
