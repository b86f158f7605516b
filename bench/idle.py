"""The idle plugin's cost beside a Go plugin's: CPU, wake-ups, resident memory, and Allocate.

Run: ``python bench/idle.py`` (or ``nox -s bench``). For each chip count (8 and
16 910B3 chips, one per card as on an Atlas 800T A2) it starts, on the real cffi
binding over the C fake libdcmi.so (tests/fake_dcmi):

* ours with the Kubernetes side off (no NODE_NAME);
* ours with the Kubernetes side on (NODE_NAME and --kubeconfig to the loopback
  API server of ascend_plugin/testing/kube_apiserver.py, run by this script);
* the Go reference of bench/go_reference/ (built here, offline: bench/go_plugin.py),
  a minimal plugin on grpc-go that makes the same library calls per poll.

Each registers with its own kubelet stand-in (grpcio, ascend_plugin/testing/),
at default settings (health every second; ours also serves its HTTP endpoint).
After a warm-up, all idle together for one window; per process, from /proc:

* CPU: user + system time over the window, in % of one core;
* wake-ups: voluntary context switches of all its threads
  (``/proc/<pid>/task/*/status``), per second;
* RSS at the end of the window.

The C fake's fault-event thread wakes every 10 ms to look for scenario changes
(a driver's event thread sleeps in the kernel until there is an event); it is
named ``fake-dcmi-event`` and its CPU and wake-ups are shown apart, not counted
in the process's figures. Then Allocate round trips, one device per call, in
interleaved rounds against the three processes: the p50 of each and the
ratio to the Go reference's, with a check that both answer the same bytes.
``--threads`` lists the wake-ups of every thread (names from py-spy, where installed).
``--baseline DIR`` runs the plugin of another source tree (a checkout of the code before a change)
beside ours in the same window, on the same fake library, so that a change is measured in one run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import CLK_TCK, ApiServerThread, Workspace, cpu_seconds, print_command, rss_mib
from go_plugin import GoUnavailable, build_go_plugin

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario

from backends.fake import FakeScenario

RESOURCE = "huawei.com/Ascend910"
DEVICE = "Ascend910-0"
WAIT = 60.0  # seconds a start-up may take before the bench gives up
FAKE_THREAD = "fake-dcmi-event"
ROUNDS = 20  # Allocate rounds, interleaved between the processes


@dataclass(frozen=True)
class ThreadSample:
    name: str
    switches: int  # voluntary context switches
    ticks: int  # user + system clock ticks


def threads(pid: int) -> dict[int, ThreadSample]:
    """Every thread of ``pid`` now."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        switches = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
        name = re.search(r"^Name:\s+(.*)$", status, re.M).group(1)  # type: ignore[union-attr]
        found[int(task.name)] = ThreadSample(name, switches, int(stat[11]) + int(stat[12]))
    return found


@dataclass
class Subject:
    """One process under measurement, with its own kubelet stand-in."""

    label: str
    chips: int
    work: Workspace
    kubelet: KubeletStandIn
    process: Any  # subprocess.Popen[bytes]
    before: dict[int, ThreadSample] = field(default_factory=dict)
    cpu_before: float = 0.0
    cpu: float = 0.0  # % of a core, the fake's event thread left out
    wakeups: float = 0.0  # per second, the fake's event thread left out
    fake_cpu: float = 0.0
    fake_wakeups: float = 0.0
    rss: float = 0.0
    per_thread: list[tuple[str, float, float]] = field(default_factory=list)  # name, wake-ups/s, CPU %
    allocations: list[float] = field(default_factory=list)
    response: bytes = b""

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def open_window(self) -> None:
        self.before, self.cpu_before = threads(self.pid), cpu_seconds(self.pid)

    def close_window(self, seconds: float, names: dict[int, str]) -> None:
        after = threads(self.pid)
        total_cpu = cpu_seconds(self.pid) - self.cpu_before
        switches = fake_switches = fake_ticks = 0
        for tid, sample in after.items():
            start = self.before.get(tid, ThreadSample(sample.name, 0, 0))
            delta, ticks = sample.switches - start.switches, sample.ticks - start.ticks
            if sample.name == FAKE_THREAD:
                fake_switches, fake_ticks = fake_switches + delta, fake_ticks + ticks
            else:
                switches += delta
            name = names.get(tid, sample.name)
            self.per_thread.append((f"{tid} {name}", delta / seconds, ticks / CLK_TCK / seconds * 100))
        self.wakeups, self.fake_wakeups = switches / seconds, fake_switches / seconds
        self.fake_cpu = fake_ticks / CLK_TCK / seconds * 100
        self.cpu = total_cpu / seconds * 100 - self.fake_cpu
        self.rss = rss_mib(self.pid)

    def allocate(self) -> bytes:
        return bytes(self.kubelet.allocate(RESOURCE, [DEVICE]))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        finally:
            self.kubelet.stop()
            shutil.rmtree(self.work.root, ignore_errors=True)


def scenario(chips: int) -> FakeScenario:
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "chips": [{"phy_id": n, "card_id": n, "device_id": 0} for n in range(chips)]}
    )


def _registered(kubelet: KubeletStandIn, what: str) -> None:
    kubelet.wait_until(lambda k: RESOURCE in k.resources and k.resources[RESOURCE].updates > 0, WAIT, what)


def _workspace(chips: int) -> tuple[Workspace, Path, KubeletStandIn]:
    work = Workspace.create()
    lines = write_scenario(work.root / "scenario.txt", scenario(chips))
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    return work, lines, kubelet


def start_ours(
    chips: int, kube: bool, library: Path, api: ApiServerThread, tree: Path | None = None
) -> Subject:
    """Our plugin, or with ``tree`` the plugin of that source tree."""
    work, lines, kubelet = _workspace(chips)
    extra = ["--backend", "dcmi", "--dcmi-library", str(library), "--dcmi-allow-untrusted-library"]
    extra += ["--http-address", "127.0.0.1:0"]
    env = {SCENARIO_ENV: str(lines)}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    label = "baseline" if tree is not None else "ours"
    if kube:
        node = f"idle-{label}-{chips}"
        api.add_node(node)
        extra += ["--kubeconfig", str(api.server.write_kubeconfig(work.root / "kubeconfig"))]
        env["NODE_NAME"] = node
    subject = Subject(f"{label}, Kubernetes {'on' if kube else 'off'}", chips, work, kubelet, None)
    subject.process = work.start_plugin(*extra, env=env, cwd=tree)
    _registered(kubelet, subject.label)
    if kube:
        name = f"mindx-dl-deviceinfo-{node}"
        deadline = time.monotonic() + WAIT
        while not api.has_configmap(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{subject.label}: no device-info ConfigMap within {WAIT:g} s")
            time.sleep(0.05)
    return subject


def start_go(chips: int, library: Path, binary: Path) -> Subject:
    work, lines, kubelet = _workspace(chips)
    work.make_device_nodes()  # the host ours sees: the Go reference hands over the shared nodes it finds
    command = [
        str(binary), "--device-plugin-path", str(work.plugin_dir), "--dcmi-library", str(library),
        "--host-root", str(work.host_root), "--resource", RESOURCE,
    ]  # fmt: skip
    process = subprocess.Popen(command, env={SCENARIO_ENV: str(lines), "PATH": "/usr/bin:/bin"})
    subject = Subject("Go reference", chips, work, kubelet, process)
    _registered(kubelet, subject.label)
    return subject


def python_thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name, from py-spy where it is installed."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return {}
    out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False).stdout
    return {int(tid): name for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', out, re.M)}


def measure_allocate(subjects: list[Subject], calls: int) -> None:
    """Allocate round trips, the processes taking turns round by round."""
    for subject in subjects:
        subject.response = subject.allocate()
        for _ in range(50):  # warm-up: connections, caches
            subject.allocate()
    per_round = max(1, calls // ROUNDS)
    for _ in range(ROUNDS):
        for subject in subjects:
            for _ in range(per_round):
                begun = time.perf_counter()
                subject.allocate()
                subject.allocations.append(time.perf_counter() - begun)


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(
        cell.rjust(width) if i else cell.ljust(width)
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
    )


def report(subjects: list[Subject], show_threads: bool) -> None:
    go = {subject.chips: subject for subject in subjects if subject.label == "Go reference"}
    head = ["process", "chips", "CPU % of a core", "wake-ups /s", "RSS MiB", "Allocate p50", "vs Go"]
    widths = [26, 5, 15, 11, 7, 12, 6]
    print(_row(head, widths))
    for subject in subjects:
        p50 = statistics.median(subject.allocations) * 1000
        reference = go.get(subject.chips)
        ratio = f"{p50 / (statistics.median(reference.allocations) * 1000):.1f}x" if reference else "-"
        cells = [
            subject.label, str(subject.chips), f"{subject.cpu:.2f}", f"{subject.wakeups:.1f}",
            f"{subject.rss:.1f}", f"{p50:.3f} ms", ratio,
        ]  # fmt: skip
        print(_row(cells, widths))
    fakes = [subject for subject in subjects if subject.fake_wakeups]
    if fakes:
        worst = max(fakes, key=lambda s: s.fake_wakeups)
        print(
            f"left out: the C fake's event thread ({FAKE_THREAD}), up to {worst.fake_wakeups:.0f} wake-ups/s "
            f"and {max(s.fake_cpu for s in fakes):.2f} % CPU per process"
        )
    for chips, reference in go.items():
        for subject in subjects:
            if subject.chips == chips and subject is not reference:
                same = "the same bytes" if subject.response == reference.response else "DIFFERENT answers"
                print(f"{chips} chips, {subject.label}: Allocate answers {same} as the Go reference")
    if show_threads:
        for subject in subjects:
            print(f"\n{subject.label}, {subject.chips} chips: threads (wake-ups/s, CPU %)")
            for name, wakeups, cpu in sorted(subject.per_thread, key=lambda t: -t[1]):
                if wakeups or cpu:
                    print(f"  {name:<40} {wakeups:7.1f}  {cpu:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chips", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds idle before the window")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of idle measured")
    parser.add_argument("--allocations", type=int, default=2000, help="Allocate calls per process")
    parser.add_argument("--threads", action="store_true", help="list every thread's wake-ups")
    parser.add_argument("--no-go", action="store_true", help="leave the Go reference out")
    parser.add_argument("--baseline", type=Path, help="also run the plugin of this source tree, beside ours")
    args = parser.parse_args()

    library = build_fake_library()
    binary: Path | None = None
    if not args.no_go:
        try:
            binary = build_go_plugin()
        except GoUnavailable as missing:
            print(f"no Go reference: {missing}", file=sys.stderr)
    api = ApiServerThread()
    subjects: list[Subject] = []
    try:
        starts: list[Callable[[], Subject]] = []
        for chips in args.chips:
            for tree in [None, args.baseline] if args.baseline else [None]:
                starts += [
                    lambda c=chips, t=tree: start_ours(c, False, library, api, t),
                    lambda c=chips, t=tree: start_ours(c, True, library, api, t),
                ]
            if binary is not None:
                starts.append(lambda c=chips, b=binary: start_go(c, library, b))
        for begin in starts:
            subjects.append(begin())
        time.sleep(args.warmup)
        for subject in subjects:
            subject.open_window()
        time.sleep(args.window)
        names = {}
        if args.threads:
            for subject in subjects:
                names.update(python_thread_names(subject.pid))
        for subject in subjects:
            subject.close_window(args.window, names)
        measure_allocate(subjects, args.allocations)
    finally:
        for subject in subjects:
            subject.stop()
        api.stop()

    print_command()
    print(
        f"idle window {args.window:g} s after {args.warmup:g} s of warm-up; health every 1 s; "
        f"{args.allocations} Allocate calls of one device per process, in {ROUNDS} interleaved rounds"
    )
    report(subjects, args.threads)


if __name__ == "__main__":
    main()
