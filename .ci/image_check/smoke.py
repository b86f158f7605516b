"""The smoke test: the built image does what the chart relies on.

Every container runs as the chart runs the plugin: read-only root file
system, every capability dropped, no new privileges, no network, on the
image's platform (under qemu when it is not this machine's). The chips come
from the C fake libdcmi.so built for that platform (fake_node.py), so the
image's own cffi loads a library of the real ABI. The kubelet stand-in
(grpcio) runs on the host, on the fake node's device-plugin directory, which
the container gets bind-mounted: registration, ListAndWatch and Allocate
cross the container boundary on unix sockets, as on a node.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ascend_plugin.doctor import library
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from image_check.clock import Clock
from image_check.engine import Engine, EngineError
from image_check.fake_node import CDI_DEVICE, DEVICE, DRIVER, FAULT, HOST_ROOT, RESOURCE, FakeNode

# Generous: without byte code the plugin compiles its modules at start, several times slower on qemu.
WAIT = 90.0
BACKEND = ("--backend", "dcmi")  # Huawei's library, found by the image's LD_LIBRARY_PATH
READYZ = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:11251/readyz', timeout=10).status)"
# What doctor checks of the library before the plugin may load it, in the binding's order.
LIBRARY_CHECKS = (library.FOUND, library.TRUST, library.GLIBC, library.LOADS)
HARDENED = ("--network=none", "--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges")


class SmokeFailure(RuntimeError):
    """The image did not do what it must; the message says what and what happened instead."""


def version(engine: Engine, image: str, expected: str, clock: Clock) -> None:
    out = engine.run("run", "--rm", *HARDENED, *engine.run_options, image, "version", clock=clock)
    if out.stdout.strip() != expected:
        raise SmokeFailure(f"`{image} version` printed {out.stdout.strip()!r}, expected {expected!r}")
    clock.say(f"version: {expected}")


def _doctor(engine: Engine, image: str, node: FakeNode, clock: Clock) -> tuple[int, dict[str, Any]]:
    result = engine.run(
        "run", "--rm", *HARDENED, *engine.run_options, *node.doctor_options(),
        "-e", "NODE_NAME=node-1", "-e", "HOST_IP=192.0.2.10",
        image, "doctor", "--root", HOST_ROOT, *BACKEND, "--format", "json",
        clock=clock, check=False,
    )  # fmt: skip
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise SmokeFailure(
            f"doctor printed no JSON report (exit code {result.returncode}):\n{result.stdout}{result.stderr}"
        ) from None
    return result.returncode, report


def doctor(engine: Engine, image: str, node: FakeNode, clock: Clock) -> None:
    """``doctor --root`` passes on the healthy board and names a host file that is a directory."""
    code, report = _doctor(engine, image, node, clock)
    problems = [f for f in report["findings"] if f["status"] == "problem"]
    if code != 0 or problems:
        raise SmokeFailure(f"doctor found problems on the healthy fake board (exit code {code}): {problems}")
    statuses = {f["name"]: f["status"] for f in report["findings"]}
    library_checks = {name: statuses.get(name) for name in LIBRARY_CHECKS}
    if set(library_checks.values()) != {"ok"}:
        raise SmokeFailure(f"doctor did not pass the fake libdcmi.so: {library_checks}")
    counts = {status: list(statuses.values()).count(status) for status in ("ok", "skipped")}
    clock.say(
        f"doctor --root: the healthy board passes ({counts['ok']} ok, {counts['skipped']} skipped; "
        f"the library {', '.join(library_checks)}: ok)"
    )
    broken = node.host("/var/slogd")
    broken.unlink()
    broken.mkdir()
    try:
        code, report = _doctor(engine, image, node, clock)
    finally:
        broken.rmdir()
        broken.write_text("")
    findings = {f["name"]: f for f in report["findings"]}
    slogd = findings.get("host-file:/var/slogd", {})
    if code != 1 or slogd.get("status") != "problem" or "is a directory" not in slogd.get("detail", ""):
        raise SmokeFailure(f"doctor missed /var/slogd as a directory (exit code {code}): {slogd or findings}")
    clock.say(f"doctor --root: /var/slogd as a directory -> exit 1, {slogd['detail'][:90]}...")


class PluginContainer:
    """The plugin daemon in a hardened container on the fake node."""

    def __init__(self, engine: Engine, image: str, node: FakeNode, mode: str, clock: Clock) -> None:
        self.engine = engine
        self.name = f"ascend-image-check-{mode}-{(engine.platform or 'native').replace('/', '-')}"
        self.clock = clock
        self.command = [
            "run", "--detach", "--name", self.name, *HARDENED, *engine.run_options, *node.plugin_options(),
            image, "run", *BACKEND, "--host-root", HOST_ROOT,
            "--allocate-mode", mode, "--health-interval", "0.2", "--log-format", "json",
        ]  # fmt: skip

    def start(self) -> None:
        self.engine.run("rm", "--force", self.name, clock=self.clock, check=False)
        self.engine.run(*self.command, clock=self.clock)

    def stop(self) -> int:
        """SIGTERM, as the kubelet's pod deletion sends; the plugin's exit code."""
        self.engine.run("stop", "--time", "20", self.name, clock=self.clock, timeout=60)
        return int(self.engine.run("wait", self.name, clock=self.clock).stdout.strip() or -1)

    def logs(self) -> str:
        out = self.engine.run("logs", self.name, clock=self.clock, check=False)
        return (out.stdout + out.stderr)[-6000:]

    def remove(self) -> None:
        self.engine.run("rm", "--force", self.name, clock=self.clock, check=False)

    def exec_python(self, code: str) -> str:
        return self.engine.run("exec", self.name, "python", "-c", code, clock=self.clock).stdout.strip()


@contextmanager
def _running(container: PluginContainer) -> Iterator[PluginContainer]:
    container.start()
    try:
        yield container
    except (SmokeFailure, TimeoutError, EngineError, subprocess.SubprocessError) as error:
        raise SmokeFailure(
            f"{error}\n--- the plugin's log ({container.name}) ---\n{container.logs()}"
        ) from error
    finally:
        container.remove()


def _wait(
    kubelet: KubeletStandIn, condition: Callable[[KubeletStandIn], bool], what: str, clock: Clock
) -> None:
    kubelet.wait_until(condition, clock.budget(WAIT), what)


@contextmanager
def kubelet_on(node: FakeNode) -> Iterator[KubeletStandIn]:
    """The kubelet stand-in serving the fake node's device-plugin directory."""
    kubelet = KubeletStandIn(node.plugin_dir)
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()


def _registered_after(count: int) -> Callable[[KubeletStandIn], bool]:
    """A new registration of our resource, beyond the first ``count``, with its devices listed."""

    def condition(kubelet: KubeletStandIn) -> bool:
        view = kubelet.resources.get(RESOURCE)
        registered = len(kubelet.registrations) > count
        return registered and view is not None and view.updates > 0 and view.stream_open

    return condition


def plugin(
    engine: Engine, image: str, node: FakeNode, kubelet: KubeletStandIn, *, mode: str, clock: Clock
) -> None:
    """The plugin registers, reports a fault and its recovery, answers Allocate, stops cleanly."""
    before = len(kubelet.registrations)
    with _running(PluginContainer(engine, image, node, mode, clock)) as container:
        _wait(kubelet, _registered_after(before), f"{RESOURCE} registered from the container", clock)
        clock.say(f"[{mode}] registered {RESOURCE}: {kubelet.health(RESOURCE)}")
        ready = container.exec_python(READYZ)
        if ready != "200":
            raise SmokeFailure(f"/readyz answered {ready} inside the container")
        node.write_scenario([FAULT])
        _wait(kubelet, lambda k: k.health(RESOURCE).get(DEVICE) == "Unhealthy", f"{DEVICE} Unhealthy", clock)
        node.write_scenario([])
        _wait(kubelet, lambda k: k.health(RESOURCE).get(DEVICE) == "Healthy", f"{DEVICE} Healthy", clock)
        clock.say(f"[{mode}] fault {FAULT}: {DEVICE} Unhealthy, cleared: Healthy again")
        clock.say(f"[{mode}] " + _allocate(kubelet, mode))
        code = container.stop()
        if code != 0:
            raise SmokeFailure(f"the plugin exited with {code} on SIGTERM, expected 0")
        sockets = [path.name for path in node.plugin_dir.iterdir() if path.name != "kubelet.sock"]
        if sockets:
            raise SmokeFailure(f"the plugin left {sockets} in the device-plugin directory")
        clock.say(f"[{mode}] SIGTERM: exit code 0, its socket removed")


def _allocate(kubelet: KubeletStandIn, mode: str) -> str:
    response = kubelet.allocate(RESOURCE, [DEVICE]).container_responses[0]
    if mode == "cdi":
        names = [device.name for device in response.cdi_devices]
        if names != [CDI_DEVICE]:
            raise SmokeFailure(f"Allocate in cdi mode answered CDI devices {names}, expected [{CDI_DEVICE}]")
        return f"Allocate [{DEVICE}] -> CDI device {names[0]}"
    nodes = {device.container_path: device.host_path for device in response.devices}
    mounts = {mount.container_path: mount.read_only for mount in response.mounts}
    if nodes.get("/dev/davinci0") != "/dev/davinci0" or "/dev/davinci_manager" not in nodes:
        raise SmokeFailure(f"Allocate answered device nodes {nodes}, without /dev/davinci0 and the manager")
    if mounts.get(DRIVER) is not True:
        raise SmokeFailure(f"Allocate answered mounts {mounts}, without {DRIVER} read-only")
    return (
        f"Allocate [{DEVICE}] -> {len(nodes)} device nodes ({', '.join(sorted(nodes))}), {DRIVER} read-only"
    )
