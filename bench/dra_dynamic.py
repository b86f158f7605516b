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
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
from common import ApiServerThread, Workspace, describe_ms, print_command
from dra import CHIPS, DRIVER, NODE, WAIT, DraNode, wait_until

from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake.library import FakeLibrary
from backends.families import Ascend310P

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


def kills(node: DraNode, count: int, window: float) -> tuple[Model, list[str], list[float]]:
    model = Model()
    problems: list[str] = []
    restarts: list[float] = []
    serial = 0
    for round_ in range(count):
        worker = Worker(node.api, node.kubelet, model, serial)
        worker.start()
        time.sleep(random.uniform(0, window))
        node.kill()
        worker.join(WAIT)
        serial = worker.serial
        restarts.append(node.restart())
        found = check(node.work, model)
        problems += [f"kill {round_ + 1}: {problem}" for problem in found]
        finish_cut_calls(node.kubelet, model)
    for uid, ref in list(model.prepared.items()):
        assert node.kubelet.unprepare(DRIVER, [ref]).claims[uid].error == ""
        del model.prepared[uid]
    left = driver_vnpus(node.work)
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

    # Every place each template fits: the claims below name any of them (:func:`partitions`).
    flags = ("--vnpu", "dynamic", "--dra-partition-places", "0", "--health-interval", "0.5")
    node = DraNode.start(*flags, scenario=scenario, kube_version="1.36", log_to_file=True)
    try:
        first_start = node.registered()
        per_chip = 1 + len(partitions())
        wait_until(lambda: len(node.devices()) == CHIPS * per_chip, "the chips and partitions published")
        latency = measure_latency(node.api, node.kubelet, args.cycles)
        model, problems, restarts = kills(node, args.kills, args.window)
        rss, cpu = node.rss_and_cpu()
    finally:
        node.stop()

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
