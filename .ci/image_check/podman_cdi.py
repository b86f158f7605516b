"""The plugin's CDI spec through podman's own CDI parser, in a private mount namespace.

podman reads specs only from /etc/cdi and /var/run/cdi and resolves every
device node from the host's /dev. So the check runs under ``unshare --mount``:
there, each path the spec names that the host lacks (the NPU device nodes,
the driver directory, /etc/cdi itself) is created on an overlay of its
nearest existing parent, the plugin's spec directory is bind-mounted on
/etc/cdi and an empty one on /var/run/cdi. Nothing of it is visible outside.

podman must then run a container with ``--device huawei.com/npu=0`` in which
every device node of the spec is the host's (same type and numbers) and the
driver directory is mounted read-only: proof it parsed the spec, not just that
it exited 0. Where podman's CDI library stops at 0.5.0 (before podman 4.7),
the same spec declared 0.6.0, what the plugin used to write, must be refused.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ascend_plugin.handover.cdi import minimum_version
from image_check.clock import Clock
from image_check.engine import Engine

RUN_TIMEOUT = 120.0
# The first podman whose CDI library knows 0.6.0 (container-device-interface v0.6.1).
FIRST_PODMAN_WITH_0_6_0 = (4, 7)


class CdiCheckError(RuntimeError):
    """podman did not accept the spec as the plugin wrote it, or accepted what it must refuse."""


@dataclass(frozen=True)
class Job:
    """What the check inside the namespace needs (passed as JSON)."""

    podman: list[str]
    run_options: list[str]
    image: str
    device: str
    spec: str  # the spec file the plugin wrote
    scratch: str
    podman_version: str


def check(podman: Engine, image: str, device: str, *, spec: Path, scratch: Path, clock: Clock) -> list[str]:
    """Run the check in a private mount namespace; its lines for the report."""
    content = json.loads(spec.read_text(encoding="utf-8"))
    if content["cdiVersion"] != minimum_version(content):
        raise CdiCheckError(
            f"{spec} declares {content['cdiVersion']}, its content needs {minimum_version(content)}"
        )
    job = Job(
        list(podman.argv), list(podman.run_options), image, device, str(spec), str(scratch),
        podman.version(clock),
    )  # fmt: skip
    job_file = scratch / "cdi-job.json"
    job_file.write_text(json.dumps(asdict(job)), encoding="utf-8")
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "image_check.podman_cdi",
         str(job_file)],
        capture_output=True, text=True, timeout=clock.budget(3 * RUN_TIMEOUT), check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise CdiCheckError(f"the CDI check failed:\n{result.stdout}{result.stderr}")
    return [f"cdi: {spec.name} declares {content['cdiVersion']}", *result.stdout.strip().splitlines()]


# -- inside the namespace -------------------------------------------------------------


class _Namespace:
    """Paths made to exist in this mount namespace only."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="ns-", dir=scratch))
        self.overlaid: set[Path] = set()

    def _overlay(self, directory: Path) -> None:
        if directory in self.overlaid:
            return
        work = self.scratch / f"overlay-{len(self.overlaid)}"
        (work / "upper").mkdir(parents=True)
        (work / "work").mkdir()
        options = f"lowerdir={directory},upperdir={work / 'upper'},workdir={work / 'work'}"
        _run(["mount", "-t", "overlay", "overlay", "-o", options, str(directory)])
        self.overlaid.add(directory)

    def ensure(self, path: Path, like: os.stat_result | None = None) -> None:
        """Make ``path`` exist: a directory, or a device node like ``like``."""
        if path.exists():
            return
        parent = next(ancestor for ancestor in path.parents if ancestor.exists())
        self._overlay(parent)
        if like is None:
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mknod(path, stat.S_IMODE(like.st_mode) | stat.S_IFMT(like.st_mode), like.st_rdev)

    def show_specs(self, directory: Path) -> None:
        """``directory`` as /etc/cdi, and nothing in /var/run/cdi."""
        self.ensure(Path("/etc/cdi"))
        _run(["mount", "--bind", str(directory), "/etc/cdi"])
        if Path("/var/run/cdi").exists():
            _run(["mount", "-t", "tmpfs", "tmpfs", "/var/run/cdi"])


def _run(command: list[str]) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def _podman_run(job: Job, paths: list[str], *, debug: bool = False) -> subprocess.CompletedProcess[str]:
    """``podman run`` with the CDI device; ``debug`` for the reason of a refusal, logged only at debug level.

    At debug level podman 4.3 also waits 20 s for conmon after a container that ran: only failures use it.
    """
    script = 'for p in "$@"; do stat -c "%F %t:%T %n" "$p"; done; cat /proc/mounts'
    level = ["--log-level=debug"] if debug else []
    command = [
        *job.podman, *level, "run", "--rm", "--network=none", *job.run_options,
        "--device", job.device, "--entrypoint", "sh", job.image, "-c", script, "sh", *paths,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)


def _cdi_lines(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if "cdi" in line.lower())[-3000:]


def _inside(job: Job) -> list[str]:
    spec = json.loads(Path(job.spec).read_text(encoding="utf-8"))
    device = job.device.partition("=")[2]
    edits = [spec.get("containerEdits", {})]
    edits += [d["containerEdits"] for d in spec["devices"] if d["name"] == device]
    nodes = [node for edit in edits for node in edit.get("deviceNodes", [])]
    mounts = [mount for edit in edits for mount in edit.get("mounts", [])]
    namespace = _Namespace(Path(job.scratch))
    null = os.stat("/dev/null")
    for node in nodes:
        namespace.ensure(Path(node.get("hostPath") or node["path"]), like=null)
    for mount in mounts:
        namespace.ensure(Path(mount["hostPath"]))
    namespace.show_specs(Path(job.spec).parent)

    result = _podman_run(job, [node["path"] for node in nodes])
    if result.returncode != 0:
        again = _podman_run(job, [node["path"] for node in nodes], debug=True)
        raise CdiCheckError(
            f"podman {job.podman_version} refused the spec (exit code {result.returncode}):\n"
            f"{result.stdout}{result.stderr}{_cdi_lines(again.stderr)}"
        )
    _verify(result.stdout, nodes, mounts)
    given = [node["path"] for node in nodes] + [f"{mount['containerPath']} (ro)" for mount in mounts]
    accepted = f"cdi: podman {job.podman_version} accepted it: --device {job.device} gave {', '.join(given)}"
    return [accepted, *_control(job, spec, namespace)]


def _verify(seen_inside: str, nodes: list[dict[str, str]], mounts: list[dict[str, str]]) -> None:
    """Every node is the host's (same type and numbers) and every mount read-only, in the container."""
    lines = seen_inside.splitlines()
    seen = {line.rpartition(" ")[2]: line for line in lines if line.startswith(("character", "block"))}
    for node in nodes:
        host = os.stat(node.get("hostPath") or node["path"])
        kind = "block" if stat.S_ISBLK(host.st_mode) else "character"
        numbers = f"{os.major(host.st_rdev):x}:{os.minor(host.st_rdev):x}"
        expected = f"{kind} special file {numbers} {node['path']}"
        found = seen.get(node["path"], "missing")
        if found != expected:
            raise CdiCheckError(f"in the container {node['path']} is {found!r}, expected {expected!r}")
    mounted = {fields[1]: fields[3].split(",") for fields in map(str.split, lines) if len(fields) > 3}
    for mount in mounts:
        if "ro" not in mounted.get(mount["containerPath"], []):
            raise CdiCheckError(
                f"{mount['containerPath']} is not mounted read-only in the container: {mounted}"
            )


def _control(job: Job, spec: dict[str, object], namespace: _Namespace) -> list[str]:
    """The same spec declared 0.6.0 must be refused by a podman that knows only up to 0.5.0."""
    numbers = tuple(int(part) for part in re.findall(r"\d+", job.podman_version)[:2])
    if numbers >= FIRST_PODMAN_WITH_0_6_0:
        return [f"cdi: control skipped: podman {job.podman_version} knows CDI 0.6.0"]
    old = namespace.scratch / "old-spec"
    old.mkdir()
    (old / Path(job.spec).name).write_text(json.dumps({**spec, "cdiVersion": "0.6.0"}), encoding="utf-8")
    namespace.show_specs(old)
    result = _podman_run(job, [], debug=True)
    if result.returncode == 0:
        raise CdiCheckError(f"podman {job.podman_version} accepted a 0.6.0 spec: the check cannot tell")
    # The reason is in a debug line, with its newlines escaped.
    reason = re.search(r"failed to load CDI Spec: (.+?)(?:\\n|\"$)", result.stderr, re.MULTILINE)
    why = reason[1].replace('\\"', '"') if reason else _cdi_lines(result.stderr)[-200:]
    return [f"cdi: control: podman {job.podman_version} refuses the same spec declared 0.6.0: {why}"]


def main(argv: list[str]) -> int:
    job = Job(**json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    try:
        lines = _inside(job)
    except (CdiCheckError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        detail = getattr(error, "stderr", "") or ""
        print(f"{error}\n{detail}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
