"""Chip telemetry, measured: scrape latency, CPU against telemetry off, freshness, health beside a hung call.

Run: ``python bench/telemetry.py`` (``nox -s bench`` runs it with the smaller counts of
noxfile.py's BENCH_COUNTS). Every plugin is its own process on the real
cffi binding over the C fake libdcmi.so (tests/fake_dcmi), 16 chips, the default
intervals (chip figures every 5 s, HBM, memory, network and ECC every 60 s,
health every 1 s). Targets in brackets:

* a scrape of /metrics at 16 chips (910B3: HBM, ECC, network, four utilizations) [p99 <= 20 ms];
* CPU of a plugin with telemetry on against one with it off, side by side over the same
  window [the difference <= 0.3 % of one core];
* a value changed in the driver (a chip's temperature, its HBM use) -> on /metrics
  [within its interval + 1 s: 6 s, 61 s];
* the health benchmark's polled figures (a fault on chip 3 of 16 -> Unhealthy at the
  kubelet, and its clearing -> Healthy) with chip 3's telemetry call hung, beside the
  same without the hang [unchanged].
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from common import cpu_seconds, describe_ms, print_command
from health import FAULT, Node, _scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_dcmi.build import build_fake_library
from local_port import free_port

CHIPS = 16


class Scraped(Node):
    """A node whose plugin serves /metrics on a port of its own."""

    def __init__(self, chip_name: str, library: Path, *extra: str) -> None:
        self.port = free_port()
        super().__init__(chip_name, CHIPS, library, "--http-address", f"127.0.0.1:{self.port}", *extra)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as response:
            return str(response.read().decode())

    def series(self, name: str, phy: int) -> str | None:
        """The value text of ``name`` for chip ``phy`` in a scrape now; None when it is not there."""
        for line in self.metrics().splitlines():
            if line.startswith(name + "{") and f'id="{phy}"' in line:
                return line.rsplit(" ", 1)[1]
        return None

    def wait_series(self, name: str, phy: int, wanted: str, limit: float) -> float:
        """Seconds until /metrics shows ``wanted`` for ``name`` of chip ``phy`` (scraped every 20 ms)."""
        started = time.monotonic()
        while self.series(name, phy) != wanted:
            if time.monotonic() - started > limit:
                raise TimeoutError(f"{name} of chip {phy} not {wanted} within {limit:g} s")
            time.sleep(0.02)
        return time.monotonic() - started


def write_edits(node: Node) -> None:
    """Write the node's scenario with its chips' edits as they are now."""
    node.write(_scenario(node.chip_name, node.chips, node.edits))


def scrapes(node: Scraped, count: int) -> None:
    node.wait_series("npu_chip_info_hbm_used_memory", CHIPS - 1, "0.0", 90)
    text = node.metrics()
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    idle_before, idle_started = cpu_seconds(node.plugin.pid), time.monotonic()
    time.sleep(10)
    idle_rate = (cpu_seconds(node.plugin.pid) - idle_before) / (time.monotonic() - idle_started)
    took = []
    cpu_before, wall_before = cpu_seconds(node.plugin.pid), time.monotonic()
    for _ in range(count):
        started = time.perf_counter()
        node.metrics()
        took.append(time.perf_counter() - started)
    busy = cpu_seconds(node.plugin.pid) - cpu_before - idle_rate * (time.monotonic() - wall_before)
    what = f"scrape of /metrics, {CHIPS} 910B3 chips ({len(samples)} series, {len(text)} bytes)"
    print(describe_ms(what, took))
    print(
        f"plugin CPU per scrape (its CPU over the scrapes less its idle rate): {1000 * busy / count:.2f} ms; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


def scrapes_against_off(node: Scraped, library: Path, count: int) -> None:
    """The same scrapes, interleaved, of a plugin with telemetry off: what the telemetry adds to a scrape."""
    off = Scraped("910B3", library, "--no-telemetry")
    try:
        off.metrics()
        took: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(count):
            for label, target in (("on", node), ("off", off)):
                started = time.perf_counter()
                target.metrics()
                took[label].append(time.perf_counter() - started)
    finally:
        off.stop()
    for label, figures in took.items():
        print(describe_ms(f"interleaved scrapes, telemetry {label}", figures))


def freshness(node: Scraped, changes: int, slow_changes: int, rng: random.Random) -> None:
    fast = []
    for change in range(changes):
        time.sleep(rng.uniform(0, 5.0))
        phy = change % CHIPS
        node.edits[phy] = {"telemetry": {"temperature_c": 50 + change % 30}}
        write_edits(node)
        fast.append(node.wait_series("npu_chip_info_temperature", phy, f"{50 + change % 30}.0", 30))
    print(describe_ms("temperature changed in the driver -> on /metrics (interval 5 s)", fast))
    slow = []
    for change in range(slow_changes):
        time.sleep(rng.uniform(0, 60.0))
        used = 1000 * (change + 1)
        node.edits[0] = {"telemetry": {"memory_used_mb": used}}
        write_edits(node)
        slow.append(node.wait_series("npu_chip_info_hbm_used_memory", 0, f"{used}.0", 120))
    if slow:
        print(describe_ms("HBM use changed in the driver -> on /metrics (interval 60 s)", slow))


def cpu_against_off(library: Path, seconds: float, windows: int) -> None:
    """Both plugins side by side; the CPU each used in each window, and the median of the differences."""
    on = Node("910B3", CHIPS, library)
    off = Node("910B3", CHIPS, library, "--no-telemetry")
    added, shares = [], []
    try:
        time.sleep(10)  # start-up work done, the first slow round read
        for _ in range(windows):
            before = {node: cpu_seconds(node.plugin.pid) for node in (on, off)}
            wall_before = time.monotonic()
            time.sleep(seconds / windows)
            wall = time.monotonic() - wall_before
            used = {node: 100 * (cpu_seconds(node.plugin.pid) - before[node]) / wall for node in (on, off)}
            added.append(used[on] - used[off])
            shares.append((used[on], used[off]))
    finally:
        on.stop()
        off.stop()
    print(
        f"CPU, {CHIPS} 910B3 chips, health every 1 s, {windows} windows of {seconds / windows:.0f} s side "
        f"by side (% of one core, on / off): " + ", ".join(f"{a:.2f} / {b:.2f}" for a, b in shares)
    )
    print(
        f"telemetry adds: median {statistics.median(added):.3f}% of one core (windows: "
        + ", ".join(f"{value:+.2f}" for value in added)
        + f"); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


def health_beside_a_hang(library: Path, count: int, rng: random.Random) -> None:
    """The polled fault on chip 3 -> kubelet, with and without chip 3's telemetry call hung."""
    figures: dict[str, tuple[list[float], list[float]]] = {}
    for label, keep in (("no hang", {}), ("chip 3's telemetry call hung", {"hang": ["temperature"]})):
        node = Node("310P3", CHIPS, library, "--health-flap-threshold", "100")
        try:
            node.edits[3] = dict(keep)
            write_edits(node)
            time.sleep(8)  # the telemetry round that hangs has come and gone
            detect, recover = [], []
            for _ in range(count):
                time.sleep(rng.uniform(0, 1.0))
                detect.append(node.edit(3, "Unhealthy", fault_codes=[FAULT], **keep))
                time.sleep(rng.uniform(0, 1.0))
                recover.append(node.edit(3, "Healthy", **keep))
        finally:
            node.stop()
        figures[label] = (detect, recover)
    for label, (detect, recover) in figures.items():
        print(describe_ms(f"310P3 x16, {label}: fault on chip 3 -> Unhealthy", detect))
        print(describe_ms(f"310P3 x16, {label}: cleared -> Healthy", recover))
    base, hung = figures["no hang"][0], figures["chip 3's telemetry call hung"][0]
    print(f"detection median ratio hung / no hang: {statistics.median(hung) / statistics.median(base):.2f}")


def round_cost(library: Path, chip_name: str, rounds: int) -> None:
    """CPU of the telemetry rounds alone, in this process: the collector on the real binding, 16 chips."""
    import asyncio
    import tempfile

    from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

    from ascend_plugin.chip_calls import ChipCalls
    from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
    from ascend_plugin.telemetry.collector import TelemetryCollector, TelemetryPolicy
    from backends.dcmi.library import DcmiLibrary
    from backends.fake import FakeScenario
    from backends.families import family_for
    from backends.session import LibrarySession

    scenario = Path(tempfile.mkdtemp(prefix="adp-bench-", dir="/tmp")) / "scenario.txt"
    chips = [{"phy_id": n, "card_id": n // 2 + 1} for n in range(CHIPS)]
    write_scenario(scenario, FakeScenario.model_validate({"chip_name": chip_name, "chips": chips}))
    os.environ[SCENARIO_ENV] = str(scenario)
    session = LibrarySession(DcmiLibrary(library, allow_untrusted=True))
    session.init()
    found = session.discover()
    backend = family_for(found[0].info).for_chip(found[0].info)(session)
    inventory = Inventory(NodeFacts(backend.table, str(library)), [ChipState(chip) for chip in found])

    async def measure() -> float:
        """CPU seconds a round takes on average, the clock moving one interval a round (the slow groups due
        every twelfth round, as at the default intervals)."""
        now = [0.0]
        calls = ChipCalls(5.0)
        policy = TelemetryPolicy()
        collector = TelemetryCollector(backend, calls, inventory, lambda: policy, clock=lambda: now[0])
        await collector.read_due()
        started = time.process_time()
        for _ in range(rounds):
            now[0] += policy.interval
            await collector.read_due()
        calls.shutdown()
        return (time.process_time() - started) / rounds

    per_round = asyncio.run(measure())
    share = 100 * per_round / TelemetryPolicy().interval
    print(
        f"telemetry rounds in process, {CHIPS} {chip_name}, {rounds} rounds at the default intervals: "
        f"{1000 * per_round:.2f} ms CPU a round: {share:.3f}% of one core"
    )
    session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--slow-changes", type=int, default=2)
    parser.add_argument("--cpu-seconds", type=float, default=300.0)
    parser.add_argument("--cpu-windows", type=int, default=10)
    parser.add_argument("--injections", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=120, help="in-process telemetry rounds per family")
    args = parser.parse_args()
    rng = random.Random(27)
    library = build_fake_library()
    print_command()
    for chip_name in ("910B3", "310P3", "310B1"):
        round_cost(library, chip_name, args.rounds)
    node = Scraped("910B3", library)
    try:
        scrapes(node, args.scrapes)
        scrapes_against_off(node, library, args.scrapes)
        freshness(node, args.changes, args.slow_changes, rng)
    finally:
        node.stop()
    cpu_against_off(library, args.cpu_seconds, args.cpu_windows)
    health_beside_a_hang(library, args.injections, rng)


if __name__ == "__main__":
    main()
