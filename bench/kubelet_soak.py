"""Kubelet-restart soak: many restarts with random downtimes, every one re-registered, nothing growing.

Run: ``python bench/kubelet_soak.py --restarts 1000`` (``nox -s bench`` runs a
short soak). The plugin runs as its own process on the fake backend at its
default settings; the grpcio kubelet stand-in goes away for a random 0-1 s
(taking ``kubelet.sock`` with it, as a stopping kubelet does), then comes back
the way a new kubelet does: every socket in the directory deleted,
``kubelet.sock`` created anew. One in four restarts has no downtime at all.

Figures: how many restarts were re-registered (all must be), the time from
the kubelet's return (its new ``kubelet.sock``) to the plugin's registration
(p50, p99, worst), and the plugin's RSS, open file descriptors and threads
every 100 restarts, with their growth per restart over the run.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from common import Workspace, describe_ms, print_command, rss_mib

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"
# Real kubelets do not restart within milliseconds of a registration: let the plugin see its
# Register answered (and the stream open) before the next one.
SETTLE = 0.05
WAIT = 30.0


def fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no Threads for {pid}")


def registered_after(kubelet: KubeletStandIn, count: int) -> bool:
    view = kubelet.resources.get(RESOURCE)
    return len(kubelet.registrations) > count and view is not None and view.stream_open and view.updates > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--restarts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    work = Workspace.create()
    work.write_scenario({"chip_name": "310B1", "chips": [{"phy_id": 0}]})
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    plugin = work.start_plugin("--log-level", "ERROR")  # a re-registration is a WARNING line each
    samples: list[tuple[int, float, int, int]] = []
    back_to_registered: list[float] = []
    downtimes: list[float] = []
    missed = 0
    try:
        kubelet.wait_until(lambda k: registered_after(k, 0), WAIT, "first registration")
        samples.append((0, rss_mib(plugin.pid), fds(plugin.pid), threads(plugin.pid)))
        for round_ in range(1, args.restarts + 1):
            time.sleep(SETTLE)
            before = len(kubelet.registrations)
            downtime = 0.0 if rng.random() < 0.25 else rng.uniform(0.0, 1.0)
            if downtime:
                kubelet.stop()
                time.sleep(downtime)
            restart = kubelet.restart()
            try:
                kubelet.wait_until(
                    lambda k, n=before: registered_after(k, n), WAIT, f"re-registration {round_}"
                )
            except TimeoutError:
                missed += 1
                continue
            first = next(r for r in kubelet.registrations[before:] if r.at >= restart.at)
            back_to_registered.append(first.at - restart.at)
            downtimes.append(downtime)
            if round_ % 100 == 0:
                samples.append((round_, rss_mib(plugin.pid), fds(plugin.pid), threads(plugin.pid)))
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()

    report(args.restarts, missed, downtimes, back_to_registered, samples)


def report(
    restarts: int,
    missed: int,
    downtimes: list[float],
    back_to_registered: list[float],
    samples: list[tuple[int, float, int, int]],
) -> None:
    print_command()
    print(f"restarts: {restarts}, re-registered: {len(back_to_registered)}, missed: {missed}")
    print(
        f"downtimes: {sum(1 for d in downtimes if d == 0)} without, the rest uniform in 0-1 s "
        f"(mean {sum(downtimes) / max(len(downtimes), 1) * 1000:.0f} ms)"
    )
    print(describe_ms("kubelet back (new kubelet.sock) -> plugin registered", back_to_registered))
    worst = max(back_to_registered)
    print(f"worst time unregistered after the kubelet came back: {worst * 1000:.1f} ms")
    print("restarts  RSS MiB  fds  threads")
    for round_, rss, open_fds, live_threads in samples:
        print(f"{round_:8d}  {rss:7.1f}  {open_fds:3d}  {live_threads:7d}")
    if len(samples) > 2:
        (r0, rss0, fd0, th0), (r1, rss1, fd1, th1) = samples[1], samples[-1]
        span = max(r1 - r0, 1)
        print(
            f"growth per restart (restart {r0} to {r1}): RSS {(rss1 - rss0) * 1024 / span:+.2f} KiB, "
            f"fds {(fd1 - fd0) / span:+.3f}, threads {(th1 - th0) / span:+.3f}"
        )


if __name__ == "__main__":
    main()
