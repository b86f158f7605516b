"""A hundred nodes against the real scheduler: what the driver's ResourceSlices cost a cluster.

Run (as root, after ``python tests/e2e/build.py``): ``python bench/cluster_scale.py --nodes 100``, or
``--sweep`` for 10, 50 and 100 nodes in one go. The end-to-end suite's control plane without a
kubelet and N simulated nodes, half 8 x 910B3 servers, half Atlas 300I Duo cards (2 x 310P3), each
with its own driver process as the chart runs it (bench/scale_fleet.py). Each layout -- ``whole``
(whole chips only), ``partitions`` (``vnpu: dynamic`` at the chart's defaults), ``partitions-<n>``
(at most n of each template a chip, 0: all) -- runs in turn on the same cluster:

1. the drivers start, register and publish; ``--fill`` of the chips are taken whole by pods that stay;
2. ``--pods`` pods with claims (bench/scale_pods.py) made at ``--rate`` a second, a rate both layouts
   keep up with, each deleted once bound: created -> bound p50 / p99, the scheduler's own SLI and
   attempt histograms, its CPU per pod;
3. ``--burst`` pods made at once: pods/s, the scheduler's and the API server's CPU while they work;
4. (first round, first layout) ``--idle`` seconds idle: the drivers' API requests (audit log), the
   CPU at rest. The drivers' requests during 1-3 are counted too ("churn").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import signal
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "e2e"), str(HERE.parent / "tests"), str(HERE.parent)]

from build import VERSIONS, build_all  # noqa: E402
from chart_harness import ChartRenderer, Rendering  # noqa: E402
from common import cpu_seconds, percentile, print_command, rss_mib  # noqa: E402
from fake_dcmi.build import build_fake_library  # noqa: E402
from node_plugin import NAMESPACE as PLUGIN_NAMESPACE  # noqa: E402
from node_plugin import applied_objects, wait_for  # noqa: E402
from scale_fleet import (  # noqa: E402
    ROOT,
    SHAPES,
    ScaleCluster,
    SimulatedNode,
    chart_env,
    memory_available_mib,
    pools,
    service_account,
    stop_all,
)
from scale_pods import (  # noqa: E402
    NAMESPACE,
    Ask,
    Connections,
    Phase,
    PodMaker,
    PodWatch,
    claims_left,
    delta,
    histogram,
    pick,
    quantile,
)

from ascend_plugin.kubeapi.client import WATCH_TIMEOUT  # noqa: E402

SWEEP = (10, 50, 100)
LAYOUTS = ("whole", "partitions", "partitions-<places>")


def chart_values(layout: str) -> dict[str, Any]:
    """The chart values of a layout: whole chips; partitions as the chart has them; at most n places."""
    if layout == "whole":
        return {"serve": "dra"}
    if layout == "partitions":
        return {"serve": "dra", "settings": {"vnpu": "dynamic"}}
    places = int(layout.removeprefix("partitions-"))
    return {"serve": "dra", "settings": {"vnpu": "dynamic", "draPartitionPlaces": places}}


CHIP_910 = Ask("chip-910", "ascend910.npu.huawei.com")
PAIR_910 = Ask("pair-910", "ascend910.npu.huawei.com", count=2, same_unit=True)
CHIP_310P = Ask("chip-310p", "ascend310p.npu.huawei.com")
PARTITIONS = (
    Ask("vir05-910", "ascend910-vir05-1c-16g.npu.huawei.com", partition=True),
    Ask("vir10-910", "ascend910-vir10-3c-32g.npu.huawei.com", partition=True),
    Ask("vir01-310p", "ascend310p-vir01.npu.huawei.com", partition=True),
    Ask("vir02-310p", "ascend310p-vir02.npu.huawei.com", partition=True),
    Ask("vir04-310p", "ascend310p-vir04.npu.huawei.com", partition=True),
)
# What the pods ask for, by weight: chips in proportion to the cluster's (four 910B3 to a 310P3);
# with partitions, half the pods ask for a partition instead.
MIXES: dict[bool, list[tuple[Ask, int]]] = {
    False: [(CHIP_910, 12), (PAIR_910, 4), (CHIP_310P, 4)],
    True: [
        (CHIP_910, 6),
        (PAIR_910, 2),
        (CHIP_310P, 2),
        *zip(PARTITIONS, (4, 4, 1, 1, 1), strict=True),
    ],
}
SLI = "scheduler_pod_scheduling_sli_duration_seconds"
ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"
WATCHED = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd")
BOUND_WITHIN = 900.0  # seconds for a phase's pods to be bound (a loaded machine, 100 nodes)
KINDS: dict[str, Callable[[Ask], bool]] = {
    "all": lambda ask: True,
    "whole-chip": lambda ask: not ask.partition,
    "partition": lambda ask: ask.partition,
}


@dataclass
class Figures:
    """One layout at one cluster size, in one round."""

    nodes: int
    layout: str
    devices: dict[str, int] = field(default_factory=dict)  # shape -> devices a node publishes
    driver_rss_mib: float = 0.0
    latency: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # kind -> p50, p99 s, n
    offered_per_s: float = 0.0
    sli: tuple[float | None, float | None] = (None, None)
    attempt: tuple[float | None, float | None] = (None, None)
    scheduler_ms_per_pod: float = 0.0
    requests_churn: float = 0.0  # per node per minute
    pods_per_s: float = 0.0  # the burst's
    cpu_burst: dict[str, float] = field(default_factory=dict)  # % of one core
    cpu_idle: dict[str, float] = field(default_factory=dict)
    requests_idle: float | None = None
    requests_life: float = 0.0  # per node per minute, from every pool published to the end of the round
    refused: int = 0


# -- what the drivers ask of the API server --------------------------------------------------------


class AuditLog:
    """The API server's audit log of the drivers' ServiceAccounts: requests per node in a window."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def per_node_per_minute(self, start: float, end: float, nodes: int) -> float:
        """Requests the drivers' tokens made between ``start`` and ``end`` (epoch s), a node a minute.

        A request is counted once (its audit events share an ID), when it was received: a watch
        when it started.
        """
        received: dict[str, float] = {}
        with contextlib.suppress(FileNotFoundError), self.path.open(encoding="utf-8") as lines:
            for line in lines:
                event = json.loads(line)
                received[event["auditID"]] = _epoch(event["requestReceivedTimestamp"])
        count = sum(1 for when in received.values() if start <= when < end)
        return count / nodes / ((end - start) / 60)


def _epoch(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# -- the control plane's figures -------------------------------------------------------------------


class Cpu:
    """CPU seconds of the control plane's processes and of all drivers, since this was made."""

    def __init__(self, cluster: ScaleCluster, drivers: Sequence[SimulatedNode]) -> None:
        self.cluster, self.drivers = cluster, drivers
        self.start = self._read()
        self.wall = time.monotonic()

    def _read(self) -> dict[str, float]:
        seconds = {name: cpu_seconds(self.cluster.pid(name)) for name in WATCHED}
        seconds["drivers"] = sum(cpu_seconds(node.process.pid) for node in self.drivers if node.process)
        return seconds

    def percent(self) -> dict[str, float]:
        now, wall = self._read(), time.monotonic() - self.wall
        return {name: 100 * (now[name] - self.start[name]) / wall for name in now}

    def used(self, name: str) -> float:
        return self._read()[name] - self.start[name]


def scheduler_get(cluster: ScaleCluster, path: str, timeout: float = 30) -> bytes:
    """A GET of the scheduler's own endpoint (``/metrics``, ``/debug/pprof/...``) as the administrator."""
    assert cluster.pki is not None
    ask = urllib.request.Request(
        f"https://127.0.0.1:{cluster.port('kube-scheduler')}{path}",
        headers={"Authorization": f"Bearer {cluster.pki.admin_token}"},
    )
    # The scheduler serves a certificate of its own making: there is no CA to check it against.
    with urllib.request.urlopen(ask, timeout=timeout, context=ssl._create_unverified_context()) as answer:
        body: bytes = answer.read()
    return body


def scheduler_metrics(cluster: ScaleCluster) -> str:
    return scheduler_get(cluster, "/metrics").decode()


class Profile(threading.Thread):
    """The scheduler's CPU profile over ``seconds`` (Go's pprof, ``go tool pprof -top FILE`` reads it)."""

    def __init__(self, cluster: ScaleCluster, seconds: float, path: Path) -> None:
        super().__init__(daemon=True)
        self.cluster, self.seconds, self.path = cluster, max(1, round(seconds)), path

    def run(self) -> None:
        path = f"/debug/pprof/profile?seconds={self.seconds}"
        self.path.write_bytes(scheduler_get(self.cluster, path, timeout=self.seconds + 60))


# -- one cluster -----------------------------------------------------------------------------------


@dataclass
class Run:
    """One cluster of ``size`` simulated nodes; each layout is measured on it in turn."""

    options: argparse.Namespace
    renders: dict[str, dict[str, Rendering]]  # layout -> shape name -> rendering
    size: int
    folder: Path
    cluster: ScaleCluster = field(init=False)
    nodes: list[SimulatedNode] = field(default_factory=list)
    running: list[SimulatedNode] = field(default_factory=list)
    stopped_at: str = ""
    published_at: float = 0.0  # epoch s: every running driver's pool complete

    def __post_init__(self) -> None:
        first = next(iter(self.renders.values()))
        users = tuple(
            f"system:serviceaccount:{PLUGIN_NAMESPACE}:{service_account(rendering)}"
            for rendering in first.values()
        )
        self.cluster = ScaleCluster(
            build_all(self.options.kubernetes),
            self.folder,
            with_node=False,
            audited_users=users,
            client_qps=self.options.client_qps,
        )

    @property
    def connections(self) -> Connections:
        assert self.cluster.pki is not None
        return Connections(self.cluster.server, self.cluster.pki.ca, self.cluster.pki.admin_token)

    def set_up(self) -> None:
        """The control plane, both releases' objects, the claim templates, the nodes (no driver yet)."""
        self.cluster.start()
        admin = self.cluster.admin()
        for renders in self.renders.values():
            for rendering in renders.values():
                admin.apply_all(applied_objects(rendering), PLUGIN_NAMESPACE)
        for ask in {ask for mix in MIXES.values() for ask, _ in mix}:
            admin.apply(ask.claim_template())
        wait_for(
            lambda: admin.read("v1", "ServiceAccount", "default", NAMESPACE), "the default ServiceAccount"
        )
        library = build_fake_library()
        renders = next(iter(self.renders.values()))
        for index in range(self.size):
            shape = SHAPES[index % len(SHAPES)]
            node = SimulatedNode(
                f"node-{index:03d}", shape, self.folder / "nodes" / f"node-{index:03d}", library
            )
            node.create(self.cluster, renders[shape.name])
            self.nodes.append(node)

    def start_drivers(self, layout: str) -> None:
        """Start the drivers a batch at a time while memory allows; each registered, its pool published."""
        admin = self.cluster.admin()
        self.running = []
        batch = self.options.batch
        for first in range(0, len(self.nodes), batch):
            group = self.nodes[first : first + batch]
            free = memory_available_mib()
            if free - self.options.memory_reserve < len(group) * self.options.driver_mib:
                self.stopped_at = (
                    f"stopped at {len(self.running)} nodes: {free:.0f} MiB available, "
                    f"{self.options.memory_reserve} MiB kept free, {self.options.driver_mib} MiB a driver"
                )
                break
            for node in group:
                node.start(chart_env(self.renders[layout][node.shape.name]))
            for node in group:
                node.register()
            wait_published(admin, group)
            self.running += group
        self.published_at = time.time()
        for node in self.nodes[len(self.running) :]:
            admin.delete("v1", "Node", node.name)  # a node without its driver is not part of the run
        self.nodes = self.nodes[: len(self.running)]

    def stop_drivers(self) -> None:
        """Stop the drivers and delete their slices, as the kubelet does once a driver stays away."""
        stop_all(self.running)
        status, answer = self.connections.request(
            "DELETE", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3Dnpu.huawei.com"
        )
        assert status == 200, answer

    def measure(self, layout: str, round_: int, idle: bool) -> Figures:
        figures = Figures(len(self.running), layout)
        published = pools(self.cluster.admin())
        for shape in SHAPES:
            counts = [published[node.name][1] for node in self.running if node.shape is shape]
            if counts:
                figures.devices[shape.name] = max(counts)
        figures.driver_rss_mib = statistics.median(rss_mib(n.process.pid) for n in self.running if n.process)
        time.sleep(self.options.settle)
        connections = self.connections
        watch = PodWatch(connections)
        watch.start()
        maker = PodMaker(connections, watch)
        tag = f"{layout[0]}{round_}"
        audit_start = time.time()
        try:
            fill = Phase(f"fill-{tag}")
            maker.run(fill, self._fill_asks(), rate=None, keep=True)
            maker.wait_bound(fill, BOUND_WITHIN)
            steady = self._steady(figures, maker, watch, tag, round_)
            burst = self._burst(figures, maker, watch, tag, round_)
            for phase in (steady, burst, fill):
                maker.release(phase, BOUND_WITHIN)
            wait_for(lambda: claims_left(connections) == 0, "every claim gone", BOUND_WITHIN, every=1.0)
            # The whole churn, not the steady phase alone: a driver renews each watch every few
            # minutes, and a window shorter than that would see all of a batch's renewals or none.
            figures.requests_churn = AuditLog(self.cluster.audit_log).per_node_per_minute(
                audit_start, time.time(), len(self.running)
            )
        finally:
            maker.close()
            watch.stop()
        if maker.errors:
            print(f"  {len(maker.errors)} deletes failed, the first: {maker.errors[0]}")
        if idle and self.options.idle:
            self._idle(figures)
        # The longest window, several of a driver's watch renewals (every 3-6 minutes, each watch its
        # own): the fairest rate, where the churn's and the idle window's may fall between renewals.
        figures.requests_life = AuditLog(self.cluster.audit_log).per_node_per_minute(
            self.published_at, time.time(), len(self.running)
        )
        return figures

    def _steady(self, figures: Figures, maker: PodMaker, watch: PodWatch, tag: str, round_: int) -> Phase:
        steady = Phase(f"pod-{tag}")
        before = scheduler_metrics(self.cluster)
        cpu = Cpu(self.cluster, self.running)
        profile = None
        if self.options.profile:
            path = self.options.profile / f"scheduler-{self.size}-{figures.layout}-{round_}.pprof"
            profile = Profile(self.cluster, self.options.pods / self.options.rate, path)
            profile.start()
        maker.run(
            steady,
            pick(MIXES[figures.layout != "whole"], self.options.pods, seed=round_),
            rate=self.options.rate,
        )
        maker.wait_bound(steady, BOUND_WITHIN)
        after = scheduler_metrics(self.cluster)
        if profile is not None:
            profile.join()
            print(f"  the scheduler's CPU profile of the steady phase: {profile.path}")
        figures.scheduler_ms_per_pod = 1000 * cpu.used("kube-scheduler") / max(len(steady.created), 1)
        figures.offered_per_s = len(steady.created) / max(steady.offered_seconds, 1e-6)
        figures.refused = len(steady.refused)
        for kind, only in KINDS.items():
            seconds = steady.latencies(watch, only)
            if seconds:
                figures.latency[kind] = (statistics.median(seconds), percentile(seconds, 0.99), len(seconds))
        sli = delta(histogram(after, SLI), histogram(before, SLI))
        figures.sli = (quantile(sli, 0.5), quantile(sli, 0.99))
        scheduled = {"result": "scheduled"}
        attempt = delta(histogram(after, ATTEMPT, scheduled), histogram(before, ATTEMPT, scheduled))
        figures.attempt = (quantile(attempt, 0.5), quantile(attempt, 0.99))
        return steady

    def _burst(self, figures: Figures, maker: PodMaker, watch: PodWatch, tag: str, round_: int) -> Phase:
        burst = Phase(f"burst-{tag}")
        cpu = Cpu(self.cluster, self.running)
        maker.run(
            burst, pick(MIXES[figures.layout != "whole"], self.options.burst, seed=1000 + round_), rate=None
        )
        maker.wait_bound(burst, BOUND_WITHIN)
        figures.cpu_burst = cpu.percent()
        figures.pods_per_s = burst.throughput(watch)
        return burst

    def _idle(self, figures: Figures) -> None:
        cpu, start = Cpu(self.cluster, self.running), time.time()
        time.sleep(self.options.idle)
        figures.cpu_idle = cpu.percent()
        figures.requests_idle = AuditLog(self.cluster.audit_log).per_node_per_minute(
            start, time.time(), len(self.running)
        )

    def _fill_asks(self) -> list[Ask]:
        asks: list[Ask] = []
        for shape, ask in zip(SHAPES, (CHIP_910, CHIP_310P), strict=True):
            chips = sum(len(node.shape.scenario.chips) for node in self.running if node.shape is shape)
            asks += [ask] * math.floor(self.options.fill * chips)
        return asks

    def tear_down(self) -> None:
        stop_all(self.nodes)
        self.cluster.stop()


def wait_published(admin: Any, group: Sequence[SimulatedNode]) -> None:
    """Until every node of ``group`` has its pool complete; a driver that died fails it at once."""

    def done() -> bool:
        for node in group:
            if node.process is not None and node.process.poll() is not None:
                raise RuntimeError(node.failure())
        found = pools(admin)
        return all(found.get(node.name, (False, 0))[0] for node in group)

    wait_for(done, f"{len(group)} nodes' pools published", 300.0, every=1.0)


# -- printing --------------------------------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.0f} ms"


def describe(figures: Figures, rate: float) -> list[str]:
    devices = ", ".join(f"{shape} {count}" for shape, count in figures.devices.items())
    everything = figures.latency.get("all", (math.nan, math.nan, 0))
    lines = [
        f"{figures.nodes} nodes, {figures.layout}: pods/s {figures.pods_per_s:.1f}; latency p50 "
        f"{ms(everything[0])}, p99 {ms(everything[1])} (at {rate:g} pods/s)",
        f"  devices a node publishes: {devices}; driver RSS median {figures.driver_rss_mib:.0f} MiB",
    ]
    for kind, (p50, p99, count) in figures.latency.items():
        lines.append(f"  created -> bound, {kind} pods (n={count}): p50 {ms(p50)}, p99 {ms(p99)}")
    lines.append(
        f"  scheduler's histograms: SLI p50 {ms(figures.sli[0])}, p99 {ms(figures.sli[1])}; attempt p50 "
        f"{ms(figures.attempt[0])}, p99 {ms(figures.attempt[1])}; its CPU {figures.scheduler_ms_per_pod:.1f} "
        f"ms a pod; pods made at {figures.offered_per_s:.1f}/s"
    )
    for when, cpu in (("burst", figures.cpu_burst), ("idle", figures.cpu_idle)):
        if cpu:
            said = ", ".join(f"{name} {value:.0f}%" for name, value in cpu.items())
            lines.append(f"  CPU {when} (% of one core): {said}")
    idle = "-" if figures.requests_idle is None else f"{figures.requests_idle:.2f}"
    lines.append(
        f"  the drivers' API requests a node a minute: idle {idle}, churn {figures.requests_churn:.2f}, "
        f"from publication to the round's end {figures.requests_life:.2f}"
    )
    if figures.refused:
        lines.append(f"  pods the API server refused to make: {figures.refused}")
    return lines


def fit(sizes: Sequence[int], values: Sequence[float]) -> str:
    """The exponent of a power law through the points (log-log least squares), and the line's slope."""
    points = [(n, v) for n, v in zip(sizes, values, strict=True) if v > 0 and not math.isnan(v)]
    if len(points) < 2:
        return "-"
    xs, ys = [math.log(n) for n, _ in points], [math.log(v) for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    exponent = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    nx, ny = statistics.fmean(n for n, _ in points), statistics.fmean(v for _, v in points)
    slope = sum((n - nx) * (v - ny) for n, v in points) / sum((n - nx) ** 2 for n, _ in points)
    return f"N^{exponent:.2f}, {slope:+.3g}/node"


ROWS: dict[str, Callable[[Figures], float | None]] = {
    "pods/s": lambda f: f.pods_per_s,
    "p50 all (ms)": lambda f: 1000 * f.latency["all"][0],
    "p99 all (ms)": lambda f: 1000 * f.latency["all"][1],
    "p99 whole-chip pods (ms)": lambda f: 1000 * f.latency["whole-chip"][1],
    "SLI p99 (ms)": lambda f: None if f.sli[1] is None else 1000 * f.sli[1],
    "scheduler CPU a pod (ms)": lambda f: f.scheduler_ms_per_pod,
    "scheduler CPU, burst (%)": lambda f: f.cpu_burst["kube-scheduler"],
    "API server CPU, burst (%)": lambda f: f.cpu_burst["kube-apiserver"],
    "API server CPU, idle (%)": lambda f: f.cpu_idle.get("kube-apiserver"),
    "requests/node/min, idle": lambda f: f.requests_idle,
    "requests/node/min, churn": lambda f: f.requests_churn,
    "requests/node/min, published to end": lambda f: f.requests_life,
}


def median_of(
    results: Sequence[Figures], layout: str, size: int, row: Callable[[Figures], float | None]
) -> float:
    values = [v for v in (row(f) for f in results if f.layout == layout and f.nodes == size) if v is not None]
    return statistics.median(values) if values else math.nan


def ratio(value: float, whole: float) -> str:
    """``value / whole`` to two places; "-" where whole chips' figure is zero or missing."""
    return f"{value / whole:.2f}" if whole and not math.isnan(whole) else "-"


def summary(results: Sequence[Figures], layouts: Sequence[str]) -> None:
    """A table of the medians by layout and N, each layout's ratio to whole chips, the fit against N."""
    sizes = sorted({f.nodes for f in results})
    others = [layout for layout in layouts if layout != "whole"]
    print("\nsummary: medians of the rounds; ratio: the layout's / whole chips' at the same N, in this run")
    header = [f"{layout} N={n}" for layout in layouts for n in sizes]
    print(" | ".join(["figure", *header, *(f"{layout} / whole" for layout in others), "fit"]))
    for name, row in ROWS.items():
        cells = {(layout, n): median_of(results, layout, n, row) for layout in layouts for n in sizes}
        values = [f"{value:.2f}" if value < 10 else f"{value:.0f}" for value in cells.values()]
        ratios = [
            "/".join(ratio(cells[layout, n], cells["whole", n]) for n in sizes) if "whole" in layouts else "-"
            for layout in others
        ]
        fits = [f"{layout} {fit(sizes, [cells[layout, n] for n in sizes])}" for layout in layouts]
        print(" | ".join([name, *values, *ratios, "; ".join(fits)]))
    if "whole" in layouts:
        for layout in others:
            targets(results, layout, max(sizes))


def targets(results: Sequence[Figures], layout: str, size: int) -> None:
    p99_whole = median_of(results, "whole", size, ROWS["p99 all (ms)"])
    p99 = median_of(results, layout, size, ROWS["p99 all (ms)"])
    rate = median_of(results, layout, size, ROWS["pods/s"])
    idle = [f.requests_idle for f in results if f.nodes == size and f.requests_idle is not None]
    print(f"\ntargets at {size} nodes, {layout}:")
    verdict = "met" if p99 <= 2 * p99_whole else "NOT met"
    print(f"  p99 {p99:.0f} ms <= 2 x whole chips' p99 {p99_whole:.0f} ms: {verdict}")
    print(f"  pods/s {rate:.1f} >= 20: {'met' if rate >= 20 else 'NOT met'}")
    if idle:
        worst = max(idle)
        print(
            f"  the drivers' idle API requests a node a minute {worst:.2f} <= 2: "
            f"{'met' if worst <= 2 else 'NOT met'}"
        )


def machine() -> None:
    total = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    load = os.getloadavg()
    print(
        f"memory {total} MiB ({memory_available_mib():.0f} MiB available); load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
        flush=True,
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--nodes", type=int, default=100, help="simulated nodes (half 910B3 x8, half 300I Duo)")
    add("--sweep", action="store_true", help=f"{', '.join(map(str, SWEEP))} nodes, one cluster each")
    add("--layouts", default="whole,partitions", help=f"comma-separated, of {', '.join(LAYOUTS)}")
    add("--rounds", type=int, default=2, help="each layout this many times, alternating which goes first")
    add("--pods", type=int, default=300, help="pods of the steady phase")
    add("--rate", type=float, default=5.0, help="pods made a second in the steady phase")
    add("--burst", type=int, default=400, help="pods made at once after it")
    add("--fill", type=float, default=0.5, help="share of the chips taken whole by pods that stay")
    # A driver renews each watch after 1-2 x WATCH_TIMEOUT s (drawn anew each time), and a fleet started
    # together renews its first watches within the same few minutes: a window as long as the longest
    # watch sees each at least once, where a shorter one may see all of them or none.
    idle = 2.0 * WATCH_TIMEOUT
    add("--idle", type=float, default=idle, help="seconds of the idle window (first round; 0: none)")
    add("--settle", type=float, default=20.0, help="seconds after publication before the pods")
    add("--client-qps", type=int, default=200, help="the scheduler's and controller manager's --kube-api-qps")
    add("--batch", type=int, default=10, help="drivers started together")
    add("--driver-mib", type=int, default=120, help="memory counted for a driver before it starts")
    add("--memory-reserve", type=int, default=3072, help="MiB left to the machine")
    add("--kubernetes", default=VERSIONS["kubernetes"]["default"])
    add("--keep", action="store_true", help="keep the clusters' folders (logs)")
    add("--profile", type=Path, help="write the scheduler's CPU profile of each steady phase here")
    options = parser.parse_args()
    if options.profile:
        options.profile.mkdir(parents=True, exist_ok=True)
    for layout in options.layouts.split(","):
        try:
            chart_values(layout)
        except ValueError:
            parser.error(f"--layouts: {layout!r} is none of {', '.join(LAYOUTS)}")
    return options


def main() -> int:
    options = parse()
    # A SIGTERM unwinds as Ctrl-C does, through the finally blocks that stop every process started.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    print_command()
    machine()
    layouts = options.layouts.split(",")
    import helm_python as helm

    with helm.Chart.load(ROOT / "charts" / "ascend-device-plugin") as loaded:
        chart = ChartRenderer(loaded)
        renders = {
            layout: {
                shape.name: chart.render_file(shape.values_file, chart_values(layout), release=shape.release)
                for shape in SHAPES
            }
            for layout in layouts
        }
    print(
        f"Kubernetes {options.kubernetes}; scheduler and controller manager --kube-api-qps "
        f"{options.client_qps}; controller manager without nodelifecycle; no kubelet"
    )
    results: list[Figures] = []
    for size in SWEEP if options.sweep else (options.nodes,):
        folder = Path(tempfile.mkdtemp(prefix="ascend-scale-", dir="/tmp"))
        run = Run(options, renders, size, folder)
        try:
            run.set_up()
            for round_ in range(options.rounds):
                for layout in layouts if round_ % 2 == 0 else layouts[::-1]:
                    run.start_drivers(layout)
                    if run.stopped_at:
                        print(f"{size} nodes asked: {run.stopped_at}")
                    try:
                        # The drivers' requests at rest do not depend on the layout: one window a size.
                        figures = run.measure(layout, round_, idle=round_ == 0 and layout == layouts[0])
                    finally:
                        run.stop_drivers()
                    print("\n".join(describe(figures, options.rate)), flush=True)
                    results.append(figures)
        finally:
            run.tear_down()
            if not options.keep:
                shutil.rmtree(folder, ignore_errors=True)
        machine()
    summary(results, layouts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
