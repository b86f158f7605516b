"""Event-loop stall under hostile clients: the longest the plugin's loop is held while it refuses them.

Run: ``python bench/loop_stall.py`` (or ``nox -s bench``). The plugin runs as
its own process on the fake backend (8 chips) with a loop-lag probe in its
event loop (bench/loop_probe.py: a task that sleeps 1 ms and records how late
it wakes). A grpcio client on the plugin's socket sends, round after round:
a 4 MiB message (read in full, refused by the wire check), a 5 MiB one
(refused from its length prefix), 10,000 device IDs, 10,000 container
requests and bytes that are no protobuf; meanwhile the kubelet stand-in
allocates as a kubelet would, and its round trips are measured too. A quiet
window of the same length comes first, for comparison. Target: no stall over
20 ms. On a shared machine the process is also stalled by not being scheduled:
the CPU the loop's thread used during a stall tells work that held the loop
from time the machine took.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
from common import Workspace, describe_ms, print_command, rss_mib

from ascend_plugin.kubelet_api.v1beta1 import AllocateRequest, ContainerAllocateRequest
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"
CHIPS = 8
MIB = 1024 * 1024


def _allocate(*containers: list[str]) -> bytes:
    return bytes(
        AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=ids) for ids in containers])
    )


HOSTILE = {
    "4 MiB message": _allocate(["x" * (4 * MIB - 16)]),
    "5 MiB message": _allocate(["x" * (5 * MIB)]),
    "10,000 IDs": _allocate([f"Ascend310-{n % CHIPS}" for n in range(10_000)]),
    "10,000 container requests": _allocate(*[[f"Ascend310-{n % CHIPS}"] for n in range(10_000)]),
    "malformed bytes": b"\x0a\xff\xff\x03" + b"\x00" * 64,
}


def attack(socket: Path, until: float, outcomes: Counter[tuple[str, str]]) -> None:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        call = channel.unary_unary("/v1beta1.DevicePlugin/Allocate")
        while time.monotonic() < until:
            for kind, payload in HOSTILE.items():
                try:
                    call(payload, timeout=30)
                    outcomes[kind, "OK"] += 1
                except grpc.RpcError as error:
                    outcomes[kind, error.code().name] += 1


def allocations(kubelet: KubeletStandIn, until: float) -> list[float]:
    latencies = []
    while time.monotonic() < until:
        begin = time.perf_counter()
        kubelet.allocate(RESOURCE, ["Ascend310-0"])
        latencies.append(time.perf_counter() - begin)
        time.sleep(0.005)
    return latencies


def stalls(probe: Path, start: float, end: float) -> list[tuple[float, float, float]]:
    """(lateness, CPU the loop's thread used meanwhile, in ms; seconds into the window) of each stall."""
    seen = []
    for line in probe.read_text().splitlines():
        if line.startswith("gc "):
            continue
        stamp, late, cpu = line.split()
        if start <= float(stamp) <= end:
            seen.append((float(late), float(cpu), float(stamp) - start))
    return seen


def collections(probe: Path, start: float, end: float) -> list[tuple[int, float]]:
    """(generation, ms) of each garbage collection over 1 ms on the loop's thread between two unix times."""
    seen = []
    for line in probe.read_text().splitlines():
        if line.startswith("gc "):
            _, stamp, generation, took = line.split()
            if start <= float(stamp) <= end:
                seen.append((int(generation), float(took)))
    return seen


def describe_collections(name: str, seen: list[tuple[int, float]]) -> str:
    if not seen:
        return f"{name}: no garbage collection over 1 ms"
    generation, took = max(seen, key=lambda collection: collection[1])
    return (
        f"{name}: {len(seen)} garbage collections over 1 ms, "
        f"the longest {took:.1f} ms (generation {generation})"
    )


def describe_stalls(name: str, seen: list[tuple[float, float, float]]) -> str:
    if not seen:
        return f"{name}: no stall over 1 ms"
    late = [wall for wall, _, _ in seen]
    over = {limit: sum(1 for ms in late if ms > limit) for limit in (5, 10, 20)}
    longest = max(seen)
    busiest = max(seen, key=lambda stall: stall[1])
    return (
        f"{name}: longest {longest[0]:.1f} ms ({longest[2]:.1f} s in); over 1 ms: {len(late)}, "
        f"over 5 ms: {over[5]}, over 10 ms: {over[10]}, over 20 ms: {over[20]}; the most CPU the loop's "
        f"thread spent in one stall: {busiest[1]:.1f} ms (of a {busiest[0]:.1f} ms stall, "
        f"{busiest[2]:.1f} s in)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each window")
    args = parser.parse_args()

    work = Workspace.create()
    work.write_scenario({"chip_name": "310B1", "chips": [{"phy_id": n} for n in range(CHIPS)]})
    probe = work.root / "probe.txt"
    probe.touch()
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    launcher = [str(Path(__file__).with_name("loop_probe.py")), str(probe)]
    plugin = work.start_plugin("--log-level", "ERROR", entry=launcher)
    try:
        kubelet.wait_until(lambda k: RESOURCE in k.resources and k.resources[RESOURCE].updates > 0, 60)
        for _ in range(50):  # warm-up: first calls pay for lazy imports and caches
            kubelet.allocate(RESOURCE, ["Ascend310-0"])

        quiet_start = time.time()
        quiet = allocations(kubelet, time.monotonic() + args.seconds)
        quiet_end = time.time()
        rss_before = rss_mib(plugin.pid)

        outcomes: Counter[tuple[str, str]] = Counter()
        until = time.monotonic() + args.seconds
        hostile = threading.Thread(target=attack, args=(work.plugin_dir / "Ascend310.sock", until, outcomes))
        attack_start = time.time()
        hostile.start()
        busy = allocations(kubelet, until)
        hostile.join()
        attack_end = time.time()
        rss_after = rss_mib(plugin.pid)
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()

    print_command()
    print(f"plugin: {CHIPS} chips on the fake backend; windows of {args.seconds:g} s")
    print(describe_stalls("quiet window, loop stalls", stalls(probe, quiet_start, quiet_end)))
    print(describe_stalls("hostile client, loop stalls", stalls(probe, attack_start, attack_end)))
    print(describe_collections("quiet window", collections(probe, quiet_start, quiet_end)))
    print(describe_collections("hostile client", collections(probe, attack_start, attack_end)))
    for kind, payload in HOSTILE.items():
        answers = ", ".join(f"{n} {status}" for (k, status), n in sorted(outcomes.items()) if k == kind)
        print(f"  {kind} ({len(payload)} bytes): {answers}")
    print(describe_ms("kubelet Allocate round trip, quiet", quiet))
    print(describe_ms("kubelet Allocate round trip, under the hostile client", busy))
    print(f"plugin RSS: {rss_before:.1f} MiB before the hostile client, {rss_after:.1f} MiB after")


if __name__ == "__main__":
    sys.exit(main())
