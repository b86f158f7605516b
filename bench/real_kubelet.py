"""The plugin beside the real kubelet, API server and scheduler: how long what an operator waits for takes.

Run (as root, after ``python tests/e2e/build.py``): ``python bench/real_kubelet.py``. A one-node
cluster of the end-to-end suite (tests/e2e: the real components built from source, containerd and
runc) runs an 8-chip 910B3 node from the C fake libdcmi.so, the plugin as the chart runs it. Measured,
``--rounds`` times each (medians and the spread are printed):

* plugin start -> the kubelet's ListAndWatch opened, and -> the Node's capacity shows 8 chips;
* chip fault injected -> the plugin says it (one health poll) -> the Node's allocatable drops (the
  kubelet's node status update, every 10 s by default: that term dominates, and is the kubelet's);
* pod created -> Running, its container started with its devices;
* with ``serve: dra``: pod with a ResourceClaimTemplate created -> Running (the controller manager makes
  the claim, the scheduler allocates it, the kubelet prepares it, containerd applies the CDI spec).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "e2e"), str(HERE.parent / "tests"), str(HERE.parent)]

from build import VERSIONS, build_all  # noqa: E402
from chart_harness import ChartRenderer  # noqa: E402
from cluster import running_cluster  # noqa: E402
from common import print_command  # noqa: E402
from node_plugin import NodePlugin, node_plugin, wait_for  # noqa: E402
from pods import delete, node_resources, pod, running  # noqa: E402

from backends.fake import FakeChip, FakeScenario  # noqa: E402

RESOURCE = "huawei.com/Ascend910"
FAULT = "80E3A201"  # SeparateNPU in Huawei's built-in faultCode.json


def scenario(faulted: frozenset[int] = frozenset()) -> FakeScenario:
    chips = [FakeChip(phy_id=phy, fault_codes=(FAULT,) if phy in faulted else ()) for phy in range(8)]
    return FakeScenario(chip_name="910B3", memory_mb=65536, vdev_node_dir=Path("/dev"), chips=tuple(chips))


def timed(condition: Callable[[], Any], what: str, started: float) -> float:
    wait_for(condition, what, within=180, every=0.05)
    return time.monotonic() - started


def figure(name: str, seconds: list[float]) -> None:
    spread = f"min {min(seconds):.2f} s, max {max(seconds):.2f} s" if len(seconds) > 1 else ""
    print(f"{name}: n={len(seconds)} median {statistics.median(seconds):.2f} s; {spread}")


def device_plugin_rounds(plugin: NodePlugin, rounds: int) -> None:
    api = plugin.cluster.admin()
    node = plugin.cluster.node
    registered, capacity, said, dropped, started = [], [], [], [], []
    for round_ in range(rounds):
        opened = plugin.count("kubelet opened ListAndWatch")
        plugin.stop()
        wait_for(lambda: node_resources(api, node, RESOURCE)[1] == 0, "the kubelet saw the plugin go")
        begun = time.monotonic()
        plugin.start()
        registered.append(
            timed(lambda n=opened: plugin.count("kubelet opened ListAndWatch") > n, "ListAndWatch", begun)
        )
        capacity.append(timed(lambda: node_resources(api, node, RESOURCE) == (8, 8), "capacity 8", begun))

        phy = round_ % 8
        unhealthy = f"Ascend910-{phy} is unhealthy"
        before = sum(1 for line in plugin.lines() if str(line.get("msg", "")).startswith(unhealthy))
        begun = time.monotonic()
        plugin.update(scenario(frozenset({phy})))
        said.append(
            timed(
                lambda said=unhealthy, n=before: (
                    sum(1 for line in plugin.lines() if str(line.get("msg", "")).startswith(said)) > n
                ),
                "the plugin's verdict",
                begun,
            )
        )
        dropped.append(timed(lambda: node_resources(api, node, RESOURCE) == (8, 7), "allocatable 7", begun))
        plugin.update(scenario())
        wait_for(lambda: node_resources(api, node, RESOURCE) == (8, 8), "allocatable 8 again", within=180)

        begun = time.monotonic()
        api.create(pod("timed", {RESOURCE: "2"}))
        running(api, "timed")
        started.append(time.monotonic() - begun)
        delete(api, "timed")
    figure("plugin start -> kubelet's ListAndWatch open", registered)
    figure("plugin start -> Node capacity 8", capacity)
    figure("chip fault -> the plugin's verdict (log)", said)
    figure("chip fault -> Node allocatable 7", dropped)
    figure("pod with 2 chips created -> Running", started)


def dra_rounds(plugin: NodePlugin, rounds: int) -> None:
    api = plugin.cluster.admin()
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-npu", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "npu", "exactly": {"deviceClassName": "ascend910.npu.huawei.com"}}]
                }
            }
        },
    }
    api.apply(template)
    wait_for(lambda: plugin.count("the kubelet registered DRA driver npu.huawei.com"), "registered")
    seconds = []
    for _ in range(rounds):
        begun = time.monotonic()
        api.create(pod("timed-claim", claim_templates={"npu": "one-npu"}))
        running(api, "timed-claim")
        seconds.append(time.monotonic() - begun)
        delete(api, "timed-claim")
    figure("pod with a ResourceClaimTemplate for one chip created -> Running", seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes", default=VERSIONS["kubernetes"]["default"])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    print_command()
    binaries = build_all(options.kubernetes)
    import helm_python as helm

    with helm.Chart.load(HERE.parent / "charts" / "ascend-device-plugin") as loaded:
        chart = ChartRenderer(loaded)
        for serve in ("device-plugin", "dra"):
            folder = Path(tempfile.mkdtemp(prefix="ascend-bench-", dir="/tmp"))
            rendering = chart.render_file("values-910.yaml", {"serve": serve})
            with (
                running_cluster(binaries, folder) as cluster,
                node_plugin(cluster, rendering, scenario(), folder / "plugin") as plugin,
            ):
                print(f"Kubernetes {options.kubernetes}, serve: {serve}")
                if serve == "device-plugin":
                    device_plugin_rounds(plugin, options.rounds)
                else:
                    dra_rounds(plugin, options.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
