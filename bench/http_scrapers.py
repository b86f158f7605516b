"""The operations endpoint under load: /healthz latency while 200 scrapers hammer it, and hostile clients.

Run: ``python bench/http_scrapers.py`` (or ``nox -s bench``). The plugin runs as its own process on
the fake backend (8 chips, telemetry on) with its HTTP endpoint; /healthz is asked one request after
another, each on a fresh connection, by this process alone, while a second process makes the load:

* quiet: no load;
* scrapers: ``--scrapers`` (200) clients ask for /metrics, /healthz and /readyz as fast as they are
  answered, each on a fresh connection as Prometheus does;
* hostile: 10 clients send 100 KiB header lines and ``--hold`` (300) clients hold idle connections
  open, more than the endpoint's cap of 256; the log lines the plugin wrote about them and the most
  file descriptors it had open are counted.

Target: /healthz answered well within the chart's liveness timeout (3 s) throughout; at most one log
line a minute about refused requests; open file descriptors bounded by the cap.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import Workspace, describe_ms, print_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from local_port import free_port

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

CHIPS = 8
HEADER_LINE = 100 * 1024


async def get(port: int, path: str, extra: bytes = b"") -> int:
    """One GET on a fresh connection; the status (0: no answer)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return 0
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n".encode() + extra + b"\r\n")
        await writer.drain()
        answer = await reader.read()
        return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    except (ConnectionError, ValueError):
        return 0
    finally:
        writer.close()


async def scraper(port: int, stop: float, counts: Counter[str]) -> None:
    paths = ("/metrics", "/metrics", "/healthz", "/readyz")
    n = 0
    while time.monotonic() < stop:
        counts[f"scrape {await get(port, paths[n % len(paths)])}"] += 1
        n += 1


async def long_header(port: int, stop: float, counts: Counter[str]) -> None:
    header = b"X-Long: " + b"a" * HEADER_LINE + b"\r\n"
    while time.monotonic() < stop:
        status = await get(port, "/readyz", header)
        counts[f"long header {status}"] += 1


async def holder(port: int, stop: float, counts: Counter[str]) -> None:
    """A connection opened and left idle, opened again 0.1 s after the plugin closes it."""
    while time.monotonic() < stop:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            counts["idle connections opened"] += 1
            with contextlib.suppress(ConnectionError):
                await reader.read()
            writer.close()
        await asyncio.sleep(0.1)


async def _load(kind: str, port: int, seconds: float, clients: int, hold: int) -> Counter[str]:
    stop = time.monotonic() + seconds
    counts: Counter[str] = Counter()
    if kind == "scrapers":
        work = [scraper(port, stop, counts) for _ in range(clients)]
    else:
        work = [long_header(port, stop, counts) for _ in range(10)]
        work += [holder(port, stop, counts) for _ in range(hold)]
    await asyncio.gather(*work)
    return counts


def load(
    kind: str, port: int, args: argparse.Namespace, results: multiprocessing.Queue[Counter[str]]
) -> None:
    """The load ``kind`` for ``--seconds`` and a second more (the probe starts half a second in)."""
    results.put(asyncio.run(_load(kind, port, args.seconds + 1, args.scrapers, args.hold)))


def healthz(port: int) -> float:
    """One /healthz on a fresh connection: its latency (it must answer 200)."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
    return time.monotonic() - began


def phase(
    args: argparse.Namespace, port: int, pid: int, kind: str | None
) -> tuple[list[float], Counter[str], int]:
    """/healthz latencies for ``--seconds`` under the load ``kind``, the load's counts, the most fds seen."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with grpc threads
    results: multiprocessing.Queue[Counter[str]] = context.Queue()
    loader = None
    if kind is not None:
        loader = context.Process(target=load, args=(kind, port, args, results))
        loader.start()
        time.sleep(0.5)  # the load is on before the probe starts
    latencies, most_fds = [], 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        latencies.append(healthz(port))
        most_fds = max(most_fds, len(os.listdir(f"/proc/{pid}/fd")))
    counts: Counter[str] = Counter()
    if loader is not None:
        counts = results.get(timeout=60)
        loader.join(60)
    return latencies, counts, most_fds


def main(args: argparse.Namespace, port: int, log: Path, pid: int) -> None:
    latencies, _, fds = phase(args, port, pid, None)
    print(describe_ms("/healthz, quiet", latencies) + f"; the plugin's fds: at most {fds}")
    latencies, counts, fds = phase(args, port, pid, "scrapers")
    print(
        describe_ms(f"/healthz, {args.scrapers} scrapers", latencies) + f"; the plugin's fds: at most {fds}"
    )
    print(f"  the scrapers' answers: {dict(sorted(counts.items()))}")
    before = len(log.read_text(errors="replace").splitlines())
    latencies, counts, fds = phase(args, port, pid, "hostile")
    what = f"10 clients of {HEADER_LINE // 1024} KiB header lines, {args.hold} idle connections"
    print(describe_ms(f"/healthz, {what}", latencies) + f"; the plugin's fds: at most {fds}")
    written = len(log.read_text(errors="replace").splitlines()) - before
    print(
        f"  the hostile clients' answers: {dict(sorted(counts.items()))}; the plugin's log lines: {written}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--scrapers", type=int, default=200)
    parser.add_argument("--hold", type=int, default=300, help="idle connections held open while hostile")
    arguments = parser.parse_args()
    print_command()
    work = Workspace.create(CHIPS)
    work.write_scenario({"chip_name": "910B3", "chips": [{"phy_id": n} for n in range(CHIPS)]})
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    free = free_port()
    plugin_log = Path(tempfile.mkdtemp(prefix="adp-bench-log-")) / "plugin.log"
    with plugin_log.open("wb") as output:
        plugin = work.start_plugin(
            "--http-address", f"127.0.0.1:{free}", "--log-level", "INFO", stderr=output
        )
    try:
        kubelet.wait_until(lambda k: any(v.updates for v in k.resources.values()), 60, "registration")
        main(arguments, free, plugin_log, plugin.pid)
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()
