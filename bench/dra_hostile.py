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
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
from common import describe_ms, print_command
from dra import CHIPS, DRIVER, DraNode, claim, wait_until

from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of every hostile request")
    args = parser.parse_args()

    node = DraNode.start(log_to_file=True)
    api, kubelet = node.api, node.kubelet
    kubelet_times: list[float] = []
    try:
        wait_until(lambda: len(node.devices()) == CHIPS, "the slice after start")
        node.registered()
        rss_before, _ = node.rss_and_cpu()
        reads_before = len(api.call(lambda: api.server.requests_of("get", "resourceclaims")))
        times, outcomes = attack(node.work.root / "plugin" / "dra.sock", args.rounds)
        reads = len(api.call(lambda: api.server.requests_of("get", "resourceclaims"))) - reads_before
        rss_after, _ = node.rss_and_cpu()
        for index in range(args.rounds):
            ref = claim(api, index)
            begin = time.perf_counter()
            answer = kubelet.prepare(DRIVER, [ref])
            kubelet.unprepare(DRIVER, [ref])
            kubelet_times.append(time.perf_counter() - begin)
            assert answer.claims[ref[2]].error == "", answer.claims[ref[2]].error
    finally:
        node.stop()

    print_command()
    for kind, seconds in times.items():
        statuses = ", ".join(f"{status} x{n}" for (k, status), n in sorted(outcomes.items()) if k == kind)
        print(describe_ms(f"{kind} ({statuses})", seconds))
    print(describe_ms("kubelet Prepare + Unprepare of a 2-device claim, after the attack", kubelet_times))
    print(f"ResourceClaim reads the hostile calls caused: {reads}")
    growth = rss_after - rss_before
    print(f"plugin RSS: {rss_before:.1f} MiB before, {rss_after:.1f} MiB after ({growth:+.1f} MiB)")
    lines = node.log.read_bytes().splitlines()
    longest = max((len(line) for line in lines), default=0)
    print(f"plugin log: {len(lines)} lines, {sum(map(len, lines))} bytes, longest line {longest} bytes")


if __name__ == "__main__":
    main()
