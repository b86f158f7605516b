"""The container engine: a Docker daemon that answers, one started here, or podman.

Docker first, because BuildKit is what the Dockerfile is written for. The
client must be able to build: Docker clients from 23 on need the buildx
plugin, so Debian's /usr/bin/docker (20.10, BuildKit built in) is preferred
over a newer client on PATH without it. A daemon started here leaves the
host's network alone (no bridge, no iptables) and keeps its images in the
state directory, so a second run reuses the base and the build cache; it is
stopped when the check ends.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from image_check.clock import Clock

DOCKERD_START_TIMEOUT = 60.0


class EngineError(RuntimeError):
    """An engine command failed; the message carries the command and its output."""


class NoEngine(Exception):
    """No engine can run here; the message says why, candidate by candidate."""


@dataclass(frozen=True)
class Engine:
    """A container engine's client with the options every call needs."""

    name: str  # "docker" or "podman"
    argv: tuple[str, ...]  # the client and its global options
    env: Mapping[str, str] = field(default_factory=dict)
    run_options: tuple[str, ...] = ()  # what every `run` needs on this machine
    platform: str | None = None  # what it builds and runs (linux/arm64); None: the engine's own

    def on(self, platform: str) -> Engine:
        """This engine building and running ``platform``'s images: --platform on every build and run."""
        return replace(self, platform=platform, run_options=(*self.run_options, f"--platform={platform}"))

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def run(
        self, *args: str, clock: Clock, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a client command, output captured; EngineError (with the output) if it fails and ``check``."""
        command = self.command(*args)
        result = subprocess.run(
            command,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=clock.budget(timeout),
            check=False,
        )
        if check and result.returncode != 0:
            output = _tail(result.stdout + result.stderr)
            raise EngineError(f"`{' '.join(command)}` exited with {result.returncode}:\n{output}")
        return result

    def has_image(self, image: str, clock: Clock) -> bool:
        """Whether ``image`` is in the engine's store, for this engine's platform when it has one.

        A tag names one image in a store, of one platform: the official base
        pulled for arm64 replaces the amd64 one under the same tag.
        """
        fmt = "{{.Os}}/{{.Architecture}}"
        found = self.run("image", "inspect", "--format", fmt, image, clock=clock, check=False)
        return found.returncode == 0 and self.platform in {None, found.stdout.strip()}

    def version(self, clock: Clock) -> str:
        fmt = "{{.Server.Version}}" if self.name == "docker" else "{{.Client.Version}}"
        return self.run("version", "--format", fmt, clock=clock).stdout.strip()


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _docker_client() -> tuple[str | None, str]:
    """A docker client that can build with BuildKit, or None and why not."""
    candidates = dict.fromkeys(path for path in ("/usr/bin/docker", shutil.which("docker")) if path)
    reasons = []
    for client in candidates:
        if not Path(client).exists():
            continue
        version = subprocess.run([client, "--version"], capture_output=True, text=True, check=False).stdout
        major = re.search(r"version (\d+)\.", version)
        if major and int(major.group(1)) < 23:
            return client, ""
        buildx = subprocess.run([client, "buildx", "version"], capture_output=True, check=False)
        if buildx.returncode == 0:
            return client, ""
        reasons.append(f"{client} ({version.strip()}) has no buildx plugin, so it cannot build with BuildKit")
    return None, "; ".join(reasons) or "no docker client installed"


def _answers(engine: Engine, clock: Clock) -> bool:
    try:
        return engine.run("info", clock=clock, timeout=30, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class OwnDockerd:
    """A dockerd started for this check, on its own socket, stopped at the end."""

    def __init__(self, client: str, dockerd: str, state: Path, scratch: Path) -> None:
        self.socket = scratch / "docker.sock"
        self.log = scratch / "dockerd.log"
        self.command = [
            dockerd,
            "--bridge=none",
            "--iptables=false",
            f"--data-root={state / 'docker'}",
            f"--exec-root={scratch / 'docker-exec'}",
            f"--pidfile={scratch / 'dockerd.pid'}",
            f"--host=unix://{self.socket}",
        ]
        self.engine = Engine("docker", (client, f"--host=unix://{self.socket}"), {"DOCKER_BUILDKIT": "1"})
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, clock: Clock) -> None:
        """Start it and wait until it answers; EngineError with its log when it does not."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + DOCKERD_START_TIMEOUT
        while not (self.socket.exists() and _answers(self.engine, clock)):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EngineError(
                    f"dockerd did not start ({' '.join(self.command)}):\n"
                    f"{_tail(self.log.read_text(errors='replace'))}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s: dockerd stops its containers and its containerd."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def podman_engine(storage: Path | None) -> Engine:
    """podman, with its own storage under ``storage`` when given (else the host's default storage).

    Both --ulimit options: root here lacks CAP_SYS_RESOURCE, and podman's
    default limits would need it. Without systemd, cgroups are managed directly.
    """
    options: list[str] = ["--events-backend=file"]
    if storage is not None:
        options += [
            f"--root={storage / 'root'}",
            f"--runroot={storage / 'run'}",
            f"--tmpdir={storage / 'tmp'}",
        ]
    if not Path("/run/systemd/system").is_dir():
        options.append("--cgroup-manager=cgroupfs")
    podman = shutil.which("podman") or "podman"
    return Engine(
        "podman",
        (podman, *options),
        run_options=("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"),
    )


def _docker(state: Path, scratch: Path, clock: Clock) -> tuple[Engine, OwnDockerd | None] | str:
    """A Docker daemon that answers, else one started here (to stop at the end); else why not."""
    client, why = _docker_client()
    if client is None:
        return why
    running = Engine("docker", (client,), {"DOCKER_BUILDKIT": "1"})
    if _answers(running, clock):
        return running, None
    dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None)
    if dockerd is None:
        return "no daemon answers and dockerd is not installed"
    if os.geteuid() != 0:
        return "no daemon answers, and starting dockerd needs root"
    own = OwnDockerd(client, dockerd, state, scratch)
    try:
        own.start(clock)
    except EngineError as error:
        return str(error)
    return own.engine, own


def _podman(clock: Clock) -> Engine | str:
    """podman on the host's default storage, if it works here; else why not."""
    if shutil.which("podman") is None:
        return "not installed"
    podman = podman_engine(None)
    info = podman.run("info", clock=clock, check=False)
    return podman if info.returncode == 0 else f"`podman info` failed: {_tail(info.stderr, 5)}"


@contextmanager
def engine(prefer: str, state: Path, scratch: Path, clock: Clock) -> Iterator[Engine]:
    """The engine to build and run on (``prefer``: auto, docker or podman); NoEngine says why none."""
    reasons: list[str] = []
    if prefer in {"auto", "docker"}:
        docker = _docker(state, scratch, clock)
        if not isinstance(docker, str):
            used, own = docker
            try:
                yield used
            finally:
                if own is not None:
                    own.stop()
            return
        reasons.append(f"docker: {docker}")
    if prefer in {"auto", "podman"}:
        podman = _podman(clock)
        if not isinstance(podman, str):
            yield podman
            return
        reasons.append(f"podman: {podman}")
    raise NoEngine("; ".join(reasons))
