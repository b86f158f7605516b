"""The DRA driver under a hostile client on its socket: answers, memory and log volume while it refuses.

Run: ``python bench/dra_hostile.py`` (or ``nox -s bench``). The plugin runs as
its own process (``run --serve dra``, fake backend, eight 910B3), registered
by the DRA kubelet stand-in, with the project's fake API server. A grpcio
client on ``dra.sock`` sends, round after round: a claim name of 5 MiB, one of
just under 4 MiB, 1,000 claims, and bytes that are no protobuf; then the
kubelet stand-in prepares and unprepares a real claim. Printed: each kind's
status and round trip, the kubelet's round trip, the plugin's RSS before and
after, the API server requests the hostile calls caused, and the plugin's log
(lines, bytes, the longest line). Run it against a checkout without the
request guard to compare.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
from common import Workspace, describe_ms, print_command, rss_mib
from dra import DRIVER, NODE, WAIT, ApiServerThread, claim, wait_until

from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1
from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi
from ascend_plugin.testing.simulate_dra import server_scenario

MIB = 1024 * 1024
PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"


def _claims(*names: str) -> bytes:
    return bytes(
        v1.NodePrepareResourcesRequest(
            claims=[v1.Claim(namespace="default", name=name, uid=str(uuid.uuid4())) for name in names]
        )
    )


HOSTILE = {
    "5 MiB claim name": _claims("x" * (5 * MIB)),
    "4 MiB claim name": _claims("x" * (4 * MIB - 64)),
    "1,000 claims": _claims(*(f"job-{n}" for n in range(1000))),
    "malformed bytes": b"\x0a\xff\xff\x03" + b"\x00" * 64,
}


def attack(socket: Path, rounds: int) -> tuple[dict[str, list[float]], Counter[tuple[str, str]]]:
    times: dict[str, list[float]] = {kind: [] for kind in HOSTILE}
    outcomes: Counter[tuple[str, str]] = Counter()
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        call = channel.unary_unary(PREPARE)
        for _ in range(rounds):
            for kind, payload in HOSTILE.items():
                begin = time.perf_counter()
                try:
                    call(payload, timeout=60)
                    outcomes[kind, "OK"] += 1
                except grpc.RpcError as error:
                    outcomes[kind, error.code().name] += 1
                times[kind].append(time.perf_counter() - begin)
    return times, outcomes


def start_driver(work: Workspace, kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    """The plugin as a DRA driver process; its log (its stderr, inherited while it starts) goes to ``log``."""
    saved_stderr = os.dup(2)
    with log.open("wb") as sink:
        os.dup2(sink.fileno(), 2)
    try:
        return work.start_plugin(
            "--serve", "dra", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
            "--dra-registry-path", str(work.root / "registry"),
            "--dra-plugin-path", str(work.root / "plugin"), "--cdi-spec-dir", str(work.root / "cdi"),
            "--no-node-labels", "--no-device-info-configmap", "--no-node-events",
        )  # fmt: skip
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of every hostile request")
    args = parser.parse_args()

    work = Workspace.create()
    work.write_scenario(server_scenario({}))
    for node in ("davinci_manager", "hisi_hdc", *(f"davinci{phy}" for phy in range(8))):
        (work.host_root / "dev").mkdir(parents=True, exist_ok=True)
        (work.host_root / "dev" / node).touch()
    api = ApiServerThread()
    api.call(lambda: api.server.add_node(NODE))
    kubeconfig = api.server.write_kubeconfig(work.root / "kubeconfig")
    kubelet = DraKubeletStandIn(work.root / "registry", NODE, KubeletApi(api.server.url, api.server.token))
    kubelet.start()
    log = work.root / "plugin.log"
    plugin = start_driver(work, kubeconfig, log)
    kubelet_times: list[float] = []
    try:
        wait_until(lambda: len(api.devices()) == 8, "the slice after start")
        kubelet.wait_until(lambda k: DRIVER in k.drivers, WAIT, "registration")
        rss_before = rss_mib(plugin.pid)
        reads_before = len(api.call(lambda: api.server.requests_of("get", "resourceclaims")))
        times, outcomes = attack(work.root / "plugin" / "dra.sock", args.rounds)
        reads = len(api.call(lambda: api.server.requests_of("get", "resourceclaims"))) - reads_before
        rss_after = rss_mib(plugin.pid)
        for index in range(args.rounds):
            ref = claim(api, index)
            begin = time.perf_counter()
            answer = kubelet.prepare(DRIVER, [ref])
            kubelet.unprepare(DRIVER, [ref])
            kubelet_times.append(time.perf_counter() - begin)
            assert answer.claims[ref[2]].error == "", answer.claims[ref[2]].error
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()
        api.stop()

    print_command()
    for kind, seconds in times.items():
        statuses = ", ".join(f"{status} x{n}" for (k, status), n in sorted(outcomes.items()) if k == kind)
        print(describe_ms(f"{kind} ({statuses})", seconds))
    print(describe_ms("kubelet Prepare + Unprepare of a 2-device claim, after the attack", kubelet_times))
    print(f"ResourceClaim reads the hostile calls caused: {reads}")
    growth = rss_after - rss_before
    print(f"plugin RSS: {rss_before:.1f} MiB before, {rss_after:.1f} MiB after ({growth:+.1f} MiB)")
    lines = log.read_bytes().splitlines()
    longest = max((len(line) for line in lines), default=0)
    print(f"plugin log: {len(lines)} lines, {sum(map(len, lines))} bytes, longest line {longest} bytes")


if __name__ == "__main__":
    main()
