"""The DRA driver, measured: Prepare of a 2-device claim, slice publication after start, a fault and a wipe.

Run: ``python bench/dra.py`` (or ``nox -s bench``). The plugin runs as its own
process (``run --serve dra``) on the fake backend, an Atlas 800T A2 of eight
910B3; the DRA kubelet stand-in (grpcio) registers it and calls it over its
unix socket as the kubelet does; the project's fake API server (loopback HTTP,
the test suite's) holds the ResourceSlices and the ResourceClaims.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import ApiServerThread, Workspace, cpu_seconds, describe_ms, print_command, rss_mib

from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi
from ascend_plugin.testing.simulate_dra import FAULT, server_scenario

DRIVER = "npu.huawei.com"
NODE = "bench-node"
CHIPS = 8
WAIT = 60.0


@dataclass
class DraNode:
    """One node for a DRA benchmark: the plugin as a DRA driver process, the API server, the kubelet.

    The plugin can be killed and started again on the same node (its checkpoint, CDI specs and
    registry stay), as a node's plugin is restarted.
    """

    work: Workspace
    api: ApiServerThread
    kubelet: DraKubeletStandIn
    flags: tuple[str, ...]  # the plugin's command line, after start_plugin's
    log_to_file: bool  # the plugin's log appended to :attr:`log` at every start, else this script's stderr
    plugin: subprocess.Popen[bytes] | None = None
    started: float = 0.0  # monotonic time the plugin process was last started

    @classmethod
    def start(
        cls,
        *extra: str,
        scenario: Callable[[Workspace], dict[str, Any]] | None = None,
        kube_version: str | None = None,
        log_to_file: bool = False,
    ) -> DraNode:
        """Eight chips, the API server with the node, the kubelet stand-in and the driver.

        ``extra``: more command-line flags; ``scenario``: the fake backend's node (eight healthy 910B3
        when None); ``kube_version``: the Kubernetes release the API server plays; ``log_to_file``: see
        the field.
        """
        work = Workspace.create(chips=CHIPS)
        work.write_scenario(scenario(work) if scenario is not None else server_scenario({}))
        api = ApiServerThread(kube_version)
        api.add_node(NODE)
        kubeconfig = api.server.write_kubeconfig(work.root / "kubeconfig")
        registry = work.root / "registry"
        kubelet = DraKubeletStandIn(registry, NODE, KubeletApi(api.server.url, api.server.token))
        kubelet.start()
        flags = (
            "--serve", "dra", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
            "--dra-registry-path", str(registry), "--dra-plugin-path", str(work.root / "plugin"),
            "--cdi-spec-dir", str(work.root / "cdi"),
            "--no-node-labels", "--no-device-info-configmap", "--no-node-events", *extra,
        )  # fmt: skip
        node = cls(work, api, kubelet, flags, log_to_file)
        node.launch()
        return node

    @property
    def log(self) -> Path:
        """The file the plugin's log goes to with ``log_to_file``."""
        return self.work.root / "plugin.log"

    def devices(self) -> list[str]:
        """The devices the driver publishes for this node now."""
        return self.api.devices(DRIVER, NODE)

    def launch(self) -> None:
        """Start the plugin process with this node's flags (again, once the last one is gone)."""
        with ExitStack() as stack:
            sink = stack.enter_context(self.log.open("ab")) if self.log_to_file else None
            self.started = time.monotonic()
            self.plugin = self.work.start_plugin(*self.flags, stderr=sink)

    def registered(self) -> float:
        """Seconds from the last start until the kubelet stand-in registered the driver it started."""
        self.kubelet.wait_until(
            lambda k: DRIVER in k.drivers and self._registered_at() is not None, WAIT, "registration"
        )
        at = self._registered_at()
        assert at is not None
        return at - self.started

    def _registered_at(self) -> float | None:
        ours = [at for name, _, at in self.kubelet.registrations if name == DRIVER and at >= self.started]
        return min(ours, default=None)

    def kill(self) -> None:
        """SIGKILL the plugin process, as a node's crash or OOM kill does."""
        assert self.plugin is not None
        os.kill(self.plugin.pid, signal.SIGKILL)
        self.plugin.wait(timeout=WAIT)
        self.plugin = None

    def restart(self) -> float:
        """Start the plugin again after a kill; the seconds until the kubelet has it registered."""
        self.launch()
        return self.registered()

    def rss_and_cpu(self) -> tuple[float, float]:
        """The plugin process's RSS (MiB) and CPU used (s) now."""
        assert self.plugin is not None
        return rss_mib(self.plugin.pid), cpu_seconds(self.plugin.pid)

    def stop(self) -> None:
        if self.plugin is not None:
            self.plugin.terminate()
            self.plugin.wait(timeout=30)
            self.plugin = None
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


def measure_slices(node: DraNode, faults: int, wipes: int) -> dict[str, list[float]]:
    """A fault written to the scenario until the slice lacks the chip, cleared until it is back; wipes."""
    figures: dict[str, list[float]] = {"faulted": [], "cleared": [], "wiped": []}
    for _ in range(faults):
        begin = time.monotonic()
        node.work.write_scenario(server_scenario({3: [FAULT]}))
        figures["faulted"].append(wait_until(lambda: "npu-3" not in node.devices(), "npu-3 out") - begin)
        begin = time.monotonic()
        node.work.write_scenario(server_scenario({}))
        figures["cleared"].append(wait_until(lambda: len(node.devices()) == CHIPS, "npu-3 back") - begin)
    for _ in range(wipes):
        begin = time.monotonic()
        node.api.call(lambda: node.api.server.wipe_slices(NODE))
        figures["wiped"].append(
            wait_until(lambda: len(node.devices()) == CHIPS, "slice back after a wipe") - begin
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
    try:
        published = wait_until(lambda: len(node.devices()) == CHIPS, "the slice after start") - node.started
        registered = node.registered()
        claims = measure_claims(node.api, node.kubelet, args.claims)
        slices = measure_slices(node, args.faults, args.wipes)
        rss, cpu = node.rss_and_cpu()
    finally:
        node.stop()

    print_command()
    print(f"process start to registered with the kubelet: {registered * 1000:.0f} ms")
    print(f"process start to the ResourceSlice published ({CHIPS} devices): {published * 1000:.0f} ms")
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
