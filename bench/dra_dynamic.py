"""vNPUs made on demand, measured: Prepare and Unprepare of a partition; 100 SIGKILLs in the middle of them.

Run: ``python bench/dra_dynamic.py`` (or ``nox -s bench``). The plugin runs as
its own process (``run --serve dra --vnpu dynamic``) on the fake backend, four
Atlas 300I Duo cards (eight 310P3, 24 GiB each), against the project's fake API
server playing Kubernetes 1.36; the DRA kubelet stand-in (grpcio) calls it over
its unix socket as the kubelet does. The fake driver keeps the vNPUs it makes
in its state file, as a real driver keeps them in the device, so they outlive
a killed plugin.

1. Latency: a claim of one partition (a random template on a chip in turn)
   prepared (its vNPU made), prepared again, unprepared (destroyed), many times.
2. Kills: a worker prepares claims of random partitions and unprepares random
   prepared ones, back to back; the plugin is killed with SIGKILL at a random
   moment, started again, and once it serves the kubelet again two things must
   hold: no vNPU on the chips that no prepared claim in the checkpoint owns,
   and every claim the kubelet was told is prepared (and not asked to
   unprepare since: the pods of a claim being unprepared are gone) still in the
   checkpoint with its vNPU present. The calls the kill cut off
   are then repeated, as the kubelet repeats them. At the end every claim is
   unprepared and no vNPU may be left.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from common import Workspace, cpu_seconds, describe_ms, print_command, rss_mib
from dra import DRIVER, NODE, WAIT, ApiServerThread, wait_until

from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi
from backends.fake.library import FakeLibrary
from backends.families import Ascend310P

CHIPS = 8
MEMORY_MB = 24576
Ref = tuple[str, str, str]


def scenario(work: Workspace) -> dict[str, Any]:
    """Four Atlas 300I Duo: eight 310P3, two to a card; the driver makes /dev/vdavinci<N> in the host root."""
    return {
        "chip_name": "310P3",
        "aicore": 8.0,
        "memory_mb": MEMORY_MB,
        "vdev_node_dir": str(work.host_root / "dev"),
        "chips": [{"phy_id": phy, "card_id": phy // 2, "device_id": phy % 2} for phy in range(CHIPS)],
    }


def partitions() -> list[str]:
    """Every partition device the driver publishes for one 310P3 chip, as ``<template>-<n>`` suffixes."""
    backend = Ascend310P.__new__(Ascend310P)  # the template table needs no library
    splits = backend.splits(None, 8.0, MEMORY_MB)  # type: ignore[arg-type]
    assert splits is not None
    return [
        f"{template.name.replace('_', '-')}-{n}"
        for template in splits.templates
        for n in range(splits.most(template))
    ]


def put_claim(api: ApiServerThread, name: str, device: str) -> Ref:
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "vnpu", "exactly": {"deviceClassName": "bench"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "vnpu", "driver": DRIVER, "pool": NODE, "device": device}]
                }
            }
        },
    }
    stored = api.call(lambda: api.server.put("resourceclaims", body))
    return ("default", name, stored["metadata"]["uid"])


@dataclass
class Driver:
    """The plugin process, started again after every kill."""

    work: Workspace
    kubeconfig: Path
    kubelet: DraKubeletStandIn
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> float:
        """Start the plugin; the seconds until the kubelet stand-in has it registered again."""
        begin = time.monotonic()
        with (self.work.root / "plugin.log").open("ab") as log:
            root = self.work.root
            self.process = self.work.start_plugin(
                "--serve", "dra", "--vnpu", "dynamic", "--node-name", NODE,
                "--kubeconfig", str(self.kubeconfig), "--dra-registry-path", str(root / "registry"),
                "--dra-plugin-path", str(root / "plugin"),
                "--cdi-spec-dir", str(root / "cdi"), "--health-interval", "0.5",
                "--no-node-labels", "--no-device-info-configmap", "--no-node-events",
                stderr=log,
            )  # fmt: skip
        self.starts += 1
        starts = self.starts
        self.kubelet.wait_until(
            lambda k: len([r for r in k.registrations if r[0] == DRIVER]) >= starts and DRIVER in k.drivers,
            WAIT,
            "registered",
        )
        return time.monotonic() - begin

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=WAIT)
        self.process = None

    def stop(self) -> tuple[float, float]:
        """Terminate the plugin; its (RSS MiB, CPU s) just before."""
        assert self.process is not None
        figures = rss_mib(self.process.pid), cpu_seconds(self.process.pid)
        self.process.terminate()
        self.process.wait(timeout=WAIT)
        self.process = None
        return figures


def measure_latency(api: ApiServerThread, kubelet: DraKubeletStandIn, cycles: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"prepare": [], "repeat": [], "unprepare": []}
    names = partitions()
    for index in range(cycles):
        ref = put_claim(api, f"latency-{index}", f"npu-{index % CHIPS}-{random.choice(names)}")
        begin = time.perf_counter()
        answer = kubelet.prepare(DRIVER, [ref]).claims[ref[2]]
        figures["prepare"].append(time.perf_counter() - begin)
        assert answer.error == "", answer.error
        begin = time.perf_counter()
        kubelet.prepare(DRIVER, [ref])
        figures["repeat"].append(time.perf_counter() - begin)
        begin = time.perf_counter()
        error = kubelet.unprepare(DRIVER, [ref]).claims[ref[2]].error
        figures["unprepare"].append(time.perf_counter() - begin)
        assert error == "", error
    return figures


@dataclass
class Model:
    """What the kubelet was told: claims prepared (and not unprepared since), calls cut off by a kill."""

    prepared: dict[str, Ref] = field(default_factory=dict)  # uid -> ref
    devices: dict[str, str] = field(default_factory=dict)  # uid -> the partition its allocation names
    cut_prepare: dict[str, Ref] = field(default_factory=dict)
    cut_unprepare: dict[str, Ref] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Worker(threading.Thread):
    """Prepares and unprepares claims back to back until a call fails (the plugin was killed)."""

    def __init__(self, api: ApiServerThread, kubelet: DraKubeletStandIn, model: Model, serial: int) -> None:
        super().__init__(name="bench-worker", daemon=True)
        self.api, self.kubelet, self.model, self.serial = api, kubelet, model, serial
        self.names = partitions()

    def run(self) -> None:
        while True:
            with self.model.lock:
                held = list(self.model.prepared.values())
            if held and (len(held) > 12 or random.random() < 0.5):
                ref = random.choice(held)
                if not self._unprepare(ref):
                    return
            else:
                self.serial += 1
                device = self._free_device()
                if not self._prepare(put_claim(self.api, f"kill-{self.serial}", device), device):
                    return

    def _free_device(self) -> str:
        """A partition no claim holds (the scheduler never allocates one device twice)."""
        with self.model.lock:
            held = set(self.model.devices.values())
        while (device := f"npu-{random.randrange(CHIPS)}-{random.choice(self.names)}") in held:
            pass
        return device

    def _prepare(self, ref: Ref, device: str) -> bool:
        with self.model.lock:
            self.model.devices[ref[2]] = device
        try:
            answer = self.kubelet.prepare(DRIVER, [ref]).claims[ref[2]]
        except (grpc.RpcError, KeyError):
            with self.model.lock:
                self.model.cut_prepare[ref[2]] = ref
                self.model.outcomes["prepare cut off"] += 1
            return False
        with self.model.lock:
            if answer.error:
                self.model.outcomes[
                    "prepare refused (no room)" if "no room" in answer.error else answer.error
                ] += 1
            else:
                self.model.prepared[ref[2]] = ref
                self.model.outcomes["prepared"] += 1
        return True

    def _unprepare(self, ref: Ref) -> bool:
        try:
            error = self.kubelet.unprepare(DRIVER, [ref]).claims[ref[2]].error
        except (grpc.RpcError, KeyError):
            with self.model.lock:
                self.model.cut_unprepare[ref[2]] = ref
                self.model.outcomes["unprepare cut off"] += 1
            return False
        with self.model.lock:
            if error:
                self.model.outcomes[f"unprepare failed: {error}"] += 1
            else:
                self.model.prepared.pop(ref[2], None)
                self.model.devices.pop(ref[2], None)
                self.model.outcomes["unprepared"] += 1
        return True


def driver_vnpus(work: Workspace) -> set[tuple[int, int]]:
    """Every vNPU the fake driver holds now, (chip, id), as another program on the node reads it."""
    library = FakeLibrary(work.scenario)
    library.init()
    try:
        return {(phy, vdev) for phy in range(CHIPS) for vdev in library.vdev_ids(phy // 2, phy % 2)}
    finally:
        library.close()


def check(work: Workspace, model: Model) -> list[str]:
    """The two promises, after a restart: no vNPU nobody owns, no claim the kubelet was told of lost."""
    claims = json.loads((work.root / "plugin" / "checkpoint.json").read_text())["claims"]
    owned = {
        (device["vnpu"]["chip"], device["vnpu"]["id"])
        for claim in claims.values()
        if claim["state"] == "prepared"
        for device in claim["devices"]
        if device.get("vnpu") and device["vnpu"]["id"] is not None
    }
    present = driver_vnpus(work)
    problems = [
        f"vNPU {vdev} on chip {phy} belongs to no prepared claim" for phy, vdev in sorted(present - owned)
    ]
    for uid in model.prepared.keys() - model.cut_unprepare.keys():  # one being unprepared may be gone: fine
        claim = claims.get(uid)
        if claim is None or claim["state"] != "prepared":
            problems.append(f"claim {uid}, answered prepared, is not in the checkpoint")
            continue
        for device in claim["devices"]:
            if (device["vnpu"]["chip"], device["vnpu"]["id"]) not in present:
                problems.append(f"claim {uid}'s vNPU {device['vnpu']} is gone")
    return problems


def finish_cut_calls(kubelet: DraKubeletStandIn, model: Model) -> None:
    """Repeat the calls a kill cut off, as the kubelet does once the driver is back."""
    for uid, ref in list(model.cut_unprepare.items()):
        assert kubelet.unprepare(DRIVER, [ref]).claims[uid].error == ""
        model.prepared.pop(uid, None)
        model.devices.pop(uid, None)
        del model.cut_unprepare[uid]
    for uid, ref in list(model.cut_prepare.items()):
        if kubelet.prepare(DRIVER, [ref]).claims[uid].error:
            model.devices.pop(uid, None)
        else:
            model.prepared[uid] = ref
        del model.cut_prepare[uid]


def kills(
    api: ApiServerThread, driver: Driver, count: int, window: float
) -> tuple[Model, list[str], list[float]]:
    model = Model()
    problems: list[str] = []
    restarts: list[float] = []
    serial = 0
    for round_ in range(count):
        worker = Worker(api, driver.kubelet, model, serial)
        worker.start()
        time.sleep(random.uniform(0, window))
        driver.kill()
        worker.join(WAIT)
        serial = worker.serial
        restarts.append(driver.start())
        found = check(driver.work, model)
        problems += [f"kill {round_ + 1}: {problem}" for problem in found]
        finish_cut_calls(driver.kubelet, model)
    for uid, ref in list(model.prepared.items()):
        assert driver.kubelet.unprepare(DRIVER, [ref]).claims[uid].error == ""
        del model.prepared[uid]
    left = driver_vnpus(driver.work)
    problems += [f"after the run: vNPU {vdev} on chip {phy} left" for phy, vdev in sorted(left)]
    return model, problems, restarts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=300, help="partition claims prepared and unprepared")
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs during Prepare and Unprepare")
    parser.add_argument("--window", type=float, default=1.0, help="a kill falls within this many seconds")
    parser.add_argument("--seed", type=int, default=29, help="random seed (partitions, kill moments)")
    args = parser.parse_args()
    random.seed(args.seed)
    # The fake API server's watches end with every killed plugin: aiohttp would log each one as an error.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)

    work = Workspace.create()
    work.write_scenario(scenario(work))
    for node in ("davinci_manager", "hisi_hdc", *(f"davinci{phy}" for phy in range(CHIPS))):
        (work.host_root / "dev").mkdir(parents=True, exist_ok=True)
        (work.host_root / "dev" / node).touch()
    api = ApiServerThread()
    api.call(lambda: setattr(api.server, "kube_version", "1.36"))
    api.call(lambda: api.server.add_node(NODE))
    kubeconfig = api.server.write_kubeconfig(work.root / "kubeconfig")
    kubelet = DraKubeletStandIn(work.root / "registry", NODE, KubeletApi(api.server.url, api.server.token))
    kubelet.start()
    driver = Driver(work, kubeconfig, kubelet)
    try:
        first_start = driver.start()
        per_chip = 1 + len(partitions())
        wait_until(lambda: len(api.devices()) == CHIPS * per_chip, "the chips and their partitions published")
        latency = measure_latency(api, kubelet, args.cycles)
        model, problems, restarts = kills(api, driver, args.kills, args.window)
        rss, cpu = driver.stop()
    finally:
        if driver.process is not None:
            driver.process.kill()
        kubelet.stop()
        api.stop()

    print_command()
    print(
        f"node: {CHIPS} x 310P3 ({per_chip} devices each: the chip and its partitions), Kubernetes 1.36 API"
    )
    print(f"first start to registered: {first_start * 1000:.0f} ms")
    print(describe_ms("NodePrepareResources, one partition (claim read, checkpoint x2, vNPU made, CDI spec)",
                      latency["prepare"]))  # fmt: skip
    print(describe_ms("NodePrepareResources, the same claim again (from the checkpoint)", latency["repeat"]))
    print(describe_ms("NodeUnprepareResources, one partition (vNPU destroyed, spec removed, checkpoint)",
                      latency["unprepare"]))  # fmt: skip
    print(f"SIGKILLs: {args.kills}; calls when killed or in between: {dict(sorted(model.outcomes.items()))}")
    if restarts:
        print(describe_ms("restart after a SIGKILL to registered (checkpoint read, chips swept)", restarts))
    print(f"broken promises: {len(problems)}")
    for problem in problems[:20]:
        print(f"  {problem}")
    print(f"plugin process at the end: RSS {rss:.1f} MiB, CPU {cpu:.2f} s")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
