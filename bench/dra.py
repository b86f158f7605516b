"""The DRA driver, measured: Prepare of a 2-device claim, slice publication after start, a fault and a wipe.

Run: ``python bench/dra.py`` (or ``nox -s bench``). The plugin runs as its own
process (``run --serve dra``) on the fake backend, an Atlas 800T A2 of eight
910B3; the DRA kubelet stand-in (grpcio) registers it and calls it over its
unix socket as the kubelet does; the project's fake API server (loopback HTTP,
the test suite's) holds the ResourceSlices and the ResourceClaims.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from common import Workspace, cpu_seconds, describe_ms, print_command, rss_mib

from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from ascend_plugin.testing.kube_apiserver import FakeApiServer
from ascend_plugin.testing.simulate_dra import FAULT, server_scenario

DRIVER = "npu.huawei.com"
NODE = "bench-node"
WAIT = 60.0
T = TypeVar("T")


class ApiServerThread:
    """The fake API server on an event loop of its own thread; its state read and changed on that loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-apiserver", daemon=True)
        self.thread.start()
        self.server = FakeApiServer()
        self.call(lambda: None)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(WAIT)

    def call(self, function: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self.loop.call_soon_threadsafe(lambda: future.set_result(function()))
        return future.result(WAIT)

    def devices(self) -> list[str]:
        slices = self.call(lambda: self.server.slices(DRIVER, NODE))
        return [device["name"] for s in slices for device in s["spec"].get("devices") or []]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(WAIT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT)
        self.loop.close()


@dataclass
class DraNode:
    """One node for a DRA benchmark: the plugin as a DRA driver process, the API server, the kubelet."""

    work: Workspace
    api: ApiServerThread
    kubelet: DraKubeletStandIn
    plugin: subprocess.Popen[bytes]
    started: float  # monotonic time the plugin process was started

    @classmethod
    def start(cls, *extra: str, stderr: IO[bytes] | None = None) -> DraNode:
        """Eight healthy chips, the API server with the node, the kubelet stand-in and the driver.

        ``extra``: more command-line flags; ``stderr``: where the plugin's log goes.
        """
        work = Workspace.create()
        work.write_scenario(server_scenario({}))
        for node in ("davinci_manager", "hisi_hdc", *(f"davinci{phy}" for phy in range(8))):
            (work.host_root / "dev").mkdir(parents=True, exist_ok=True)
            (work.host_root / "dev" / node).touch()
        api = ApiServerThread()
        api.call(lambda: api.server.add_node(NODE))
        kubeconfig = api.server.write_kubeconfig(work.root / "kubeconfig")
        registry = work.root / "registry"
        kubelet = DraKubeletStandIn(registry, NODE, KubeletApi(api.server.url, api.server.token))
        kubelet.start()
        started = time.monotonic()
        plugin = work.start_plugin(
            "--serve", "dra", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
            "--dra-registry-path", str(registry), "--dra-plugin-path", str(work.root / "plugin"),
            "--cdi-spec-dir", str(work.root / "cdi"),
            "--no-node-labels", "--no-device-info-configmap", "--no-node-events", *extra,
            stderr=stderr,
        )  # fmt: skip
        return cls(work, api, kubelet, plugin, started)

    def stop(self) -> None:
        self.plugin.terminate()
        self.plugin.wait(timeout=30)
        self.kubelet.stop()
        self.api.stop()


def wait_until(condition: Callable[[], bool], what: str) -> float:
    """Poll ``condition`` every millisecond; the time.monotonic() when it held."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.001)
    return time.monotonic()


def claim(api: ApiServerThread, index: int) -> tuple[str, str, str]:
    body = {
        "metadata": {"name": f"job-{index}", "namespace": "default"},
        "spec": {
            "devices": {"requests": [{"name": "npus", "exactly": {"deviceClassName": f"ascend910.{DRIVER}"}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "npus", "driver": DRIVER, "pool": NODE, "device": device}
                        for device in ("npu-2", "npu-3")
                    ]
                }
            }
        },
    }
    stored = api.call(lambda: api.server.put("resourceclaims", body))
    return ("default", f"job-{index}", stored["metadata"]["uid"])


def measure_claims(api: ApiServerThread, kubelet: DraKubeletStandIn, count: int) -> dict[str, list[float]]:
    """Prepare a new 2-device claim, prepare it again, unprepare it; ``count`` times."""
    figures: dict[str, list[float]] = {"prepare": [], "repeat": [], "unprepare": []}
    for index in range(count):
        ref = claim(api, index)
        begin = time.perf_counter()
        answer = kubelet.prepare(DRIVER, [ref])
        figures["prepare"].append(time.perf_counter() - begin)
        assert answer.claims[ref[2]].error == "", answer.claims[ref[2]].error
        begin = time.perf_counter()
        kubelet.prepare(DRIVER, [ref])
        figures["repeat"].append(time.perf_counter() - begin)
        begin = time.perf_counter()
        kubelet.unprepare(DRIVER, [ref])
        figures["unprepare"].append(time.perf_counter() - begin)
    return figures


def measure_slices(api: ApiServerThread, work: Workspace, faults: int, wipes: int) -> dict[str, list[float]]:
    """A fault written to the scenario until the slice lacks the chip, cleared until it is back; wipes."""
    figures: dict[str, list[float]] = {"faulted": [], "cleared": [], "wiped": []}
    for _ in range(faults):
        begin = time.monotonic()
        work.write_scenario(server_scenario({3: [FAULT]}))
        figures["faulted"].append(wait_until(lambda: "npu-3" not in api.devices(), "npu-3 out") - begin)
        begin = time.monotonic()
        work.write_scenario(server_scenario({}))
        figures["cleared"].append(wait_until(lambda: len(api.devices()) == 8, "npu-3 back") - begin)
    for _ in range(wipes):
        begin = time.monotonic()
        api.call(lambda: api.server.wipe_slices(NODE))
        figures["wiped"].append(
            wait_until(lambda: len(api.devices()) == 8, "slice back after a wipe") - begin
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claims", type=int, default=300, help="2-device claims prepared and unprepared")
    parser.add_argument("--faults", type=int, default=20, help="faults injected and cleared")
    parser.add_argument("--wipes", type=int, default=20, help="times the node's slices are wiped")
    parser.add_argument("--health-interval", default="0.1", help="the plugin's health poll, seconds")
    args = parser.parse_args()

    # Flap damping off: a chip faulted twenty times a minute would otherwise be held out as a flapper.
    node = DraNode.start("--health-interval", args.health_interval, "--health-flap-hold", "0")
    work, api, kubelet, plugin, started = node.work, node.api, node.kubelet, node.plugin, node.started
    try:
        published = wait_until(lambda: len(api.devices()) == 8, "the slice after start")
        kubelet.wait_until(lambda k: DRIVER in k.drivers, WAIT, "registration")
        registered = kubelet.registrations[0][2]
        claims = measure_claims(api, kubelet, args.claims)
        slices = measure_slices(api, work, args.faults, args.wipes)
        rss, cpu = rss_mib(plugin.pid), cpu_seconds(plugin.pid)
    finally:
        node.stop()

    print_command()
    print(f"process start to registered with the kubelet: {(registered - started) * 1000:.0f} ms")
    print(f"process start to the ResourceSlice published (8 devices): {(published - started) * 1000:.0f} ms")
    print(
        describe_ms(
            "NodePrepareResources, new 2-device claim (claim read, CDI spec, checkpoint fsync)",
            claims["prepare"],
        )
    )
    print(describe_ms("NodePrepareResources, the same claim again (from the checkpoint)", claims["repeat"]))
    print(
        describe_ms(
            "NodeUnprepareResources, 2-device claim (spec removed, checkpoint fsync)", claims["unprepare"]
        )
    )
    print(
        describe_ms(
            f"fault written to the slice without the chip (health poll {args.health_interval} s)",
            slices["faulted"],
        )
    )
    print(describe_ms("fault cleared to the chip back in the slice", slices["cleared"]))
    print(describe_ms("slices wiped (as a starting kubelet does) to published again", slices["wiped"]))
    print(f"plugin process after the run: RSS {rss:.1f} MiB, CPU {cpu:.2f} s")


if __name__ == "__main__":
    main()
