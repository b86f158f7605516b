"""The kubelet path, measured: Allocate round trips, start to registered, re-registration after a restart.

Run: ``python bench/kubelet_path.py`` (or ``nox -s bench``). The plugin runs as
its own process on the fake backend; the kubelet stand-in (grpcio) drives it
over the unix socket the way the kubelet does.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import Workspace, cpu_seconds, describe_ms, print_command, rss_mib

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"
SETTLE = 0.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--allocations", type=int, default=2000)
    parser.add_argument("--restarts", type=int, default=20)
    args = parser.parse_args()

    work = Workspace.create()
    work.write_scenario({"chip_name": "310B1", "chips": [{"phy_id": 0}]})
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    started = time.monotonic()
    plugin = work.start_plugin()
    try:
        kubelet.wait_until(lambda k: RESOURCE in k.resources and k.resources[RESOURCE].updates > 0, 60)
        to_registered = kubelet.registrations[0].at - started

        for _ in range(50):  # warm-up
            kubelet.allocate(RESOURCE, ["Ascend310-0"])
        latencies = []
        for _ in range(args.allocations):
            begin = time.perf_counter()
            kubelet.allocate(RESOURCE, ["Ascend310-0"])
            latencies.append(time.perf_counter() - begin)

        reregistration = []
        for round_ in range(args.restarts):
            # Real kubelets do not restart within milliseconds of a registration;
            # let the plugin see its Register answered before the next restart.
            time.sleep(SETTLE)
            before = len(kubelet.registrations)
            restart = kubelet.restart()
            kubelet.wait_until(lambda k, n=before: len(k.registrations) > n, 30, f"re-registration {round_}")
            reregistration.append(kubelet.registrations[-1].at - restart.at)

        rss, cpu = rss_mib(plugin.pid), cpu_seconds(plugin.pid)
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()

    print_command()
    print(f"process start to registered: {to_registered * 1000:.0f} ms")
    print(describe_ms("Allocate round trip (grpcio stand-in -> grpclib plugin)", latencies))
    print(describe_ms(f"re-registration after kubelet restart (median of {args.restarts})", reregistration))
    print(f"median re-registration: {statistics.median(reregistration) * 1000:.0f} ms")
    print(f"plugin process after the run: RSS {rss:.1f} MiB, CPU {cpu:.2f} s")


if __name__ == "__main__":
    main()
