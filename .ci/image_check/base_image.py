"""The base image: the official one when it can be had, else a stand-in from Debian packages.

The Dockerfile's default base is the official ``python:<version>-slim-<debian>``
under BASE_REGISTRY. Where no registry with it is reachable (Docker Hub is not,
from CI here), the stand-in is that Debian release itself, for the platform
being built: ``debootstrap --arch=<arch> --variant=minbase`` with python3 and
pip (a foreign architecture's second stage runs under qemu, see emulation.py),
trimmed like the official image (no docs, locales, apt lists or byte code),
with ``python`` in /usr/local/bin as there. It becomes a one-layer image
through the engine's own build (``FROM scratch``, ``ADD`` of the root file
system), which labels it with its platform, as ``docker import`` cannot. It
has the same Python minor version and glibc; its size is not the official
image's, so the whole-image budget is only checked on the official base.

Stand-ins are kept in the engine's store under a tag naming the Debian release
and the architecture, so a second run, and every step of this one, reuses them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from image_check.clock import Clock
from image_check.engine import Engine
from image_check.platforms import Platform

# The Python each Debian release ships as python3.
DEBIAN_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PULL_TIMEOUT = 300.0
# Under emulation the second stage takes minutes: dpkg and the byte compilation of the
# Python packages' maintainer scripts run on qemu (about 3 min for arm64 on CI's machine).
DEBOOTSTRAP_TIMEOUT = 600.0
STANDIN_BUILD_TIMEOUT = 180.0
# The stand-in's Dockerfile: its root file system, and what the official image sets that
# the plugin's image relies on.
STANDIN_DOCKERFILE = """\
FROM scratch
ADD root.tar /
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
ENV LANG=C.UTF-8
CMD ["python3"]
"""
# Printed by the base's Python: its version and machine, as the check expects them.
IDENTIFY = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine())"
# Removed from the stand-in's root, as the official image has none of them.
TRIMMED = (
    "usr/share/doc/*",
    "usr/share/man/*",
    "usr/share/info/*",
    "var/cache/apt/*.bin",
    "var/cache/apt/archives/*.deb",
    "var/lib/apt/lists/*",
    "var/log/*.log",
    "dev/*",
)


# debootstraps under way, each in its own process group (its chroot's dpkg and scripts with it).
_RUNNING: set[subprocess.Popen[str]] = set()


class BaseImageError(RuntimeError):
    """No base image could be had; the message says what was tried."""


@dataclass(frozen=True)
class Base:
    """The base the image was built on."""

    image: str
    official: bool
    how: str  # how it was obtained, for the report
    build_args: tuple[str, ...]  # what tells the Dockerfile to use it


def dockerfile_args(dockerfile: Path) -> dict[str, str]:
    """The Dockerfile's global ARG defaults, with references to earlier ones expanded."""
    args: dict[str, str] = {}
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        if line.startswith("FROM "):
            break
        match = re.match(r"^ARG (\w+)=(.*)$", line)
        if match:
            args[match[1]] = re.sub(r"\$\{(\w+)\}", lambda ref: args[ref[1]], match[2])
    return args


def official_base(dockerfile: Path, registry: str | None) -> str:
    """The Dockerfile's default base, under ``registry`` when given."""
    args = dockerfile_args(dockerfile)
    default = args["BASE_IMAGE"]
    return default if registry is None else default.replace(args["BASE_REGISTRY"], registry, 1)


def choose(
    engine: Engine,
    dockerfile: Path,
    target: Platform,
    *,
    registry: str | None,
    mirror: str,
    scratch: Path,
    clock: Clock,
) -> Base:
    """The official base for ``target`` if present or pullable, else the stand-in (built unless cached).

    Either way its Python must answer in a container, with the Dockerfile's
    version and ``target``'s machine: the proof the engine runs this platform.
    """
    official = official_base(dockerfile, registry)
    registry_arg = () if registry is None else (f"BASE_REGISTRY={registry}",)
    match = re.search(r":(\d+\.\d+)-slim-(\w+)$", official)
    if match is None:
        raise BaseImageError(f"cannot tell the Python and Debian release of {official}")
    python, suite = match[1], match[2]
    base = _official(engine, official, registry_arg, clock) or _standin(
        engine, official, python, suite, target, mirror=mirror, scratch=scratch, clock=clock
    )
    reported = engine.run(
        "run", "--rm", "--network=none", *engine.run_options, base.image, "python", "-c", IDENTIFY,
        clock=clock, timeout=STANDIN_BUILD_TIMEOUT,
    ).stdout.split()  # fmt: skip
    if reported != [python, target.machine]:
        raise BaseImageError(
            f"{base.image} runs Python {' on '.join(reported)}, not Python {python} on {target.machine}"
        )
    return base


def _official(engine: Engine, official: str, registry_arg: tuple[str, ...], clock: Clock) -> Base | None:
    if engine.has_image(official, clock):
        return Base(official, True, "official image, already present", registry_arg)
    platform = () if engine.platform is None else ("--platform", engine.platform)
    pull = engine.run("pull", *platform, official, clock=clock, timeout=PULL_TIMEOUT, check=False)
    if pull.returncode == 0:
        return Base(official, True, "official image, pulled", registry_arg)
    why = (pull.stderr or pull.stdout).strip().splitlines()
    clock.say(f"cannot pull {official}: {why[-1] if why else f'exit code {pull.returncode}'}")
    return None


def standin_tag(python: str, suite: str, target: Platform) -> str:
    return f"ascend-ci-base:{python}-{suite}-{target.arch}"


def _standin(
    engine: Engine,
    official: str,
    python: str,
    suite: str,
    target: Platform,
    *,
    mirror: str,
    scratch: Path,
    clock: Clock,
) -> Base:
    if DEBIAN_PYTHON.get(suite) != python:
        raise BaseImageError(
            f"no stand-in for {official}: Debian {suite} ships Python {DEBIAN_PYTHON.get(suite, '?')}, "
            f"not {python}"
        )
    standin = standin_tag(python, suite, target)
    standin_arg = (f"BASE_IMAGE={standin}",)
    if engine.has_image(standin, clock):
        return Base(standin, False, f"stand-in from Debian {suite} {target.arch}, cached", standin_arg)
    build_standin(engine, standin, suite, target, mirror=mirror, scratch=scratch, clock=clock)
    return Base(standin, False, f"stand-in from Debian {suite} {target.arch}, built", standin_arg)


def build_standin(
    engine: Engine, tag: str, suite: str, target: Platform, *, mirror: str, scratch: Path, clock: Clock
) -> None:
    """debootstrap the release for ``target``, trim it, make it the one layer of ``tag``."""
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise BaseImageError(
            "the official base cannot be pulled, and the stand-in needs debootstrap and root "
            "(apt-get install debootstrap; or pass --base-registry <a mirror with the official image>)"
        )
    work = scratch / f"standin-{target.arch}"
    root, context = work / "root", work / "context"
    context.mkdir(parents=True)
    clock.say(f"building the stand-in base {tag}: debootstrap --arch={target.arch} {suite} from {mirror}")
    code, output = _debootstrap(
        ["debootstrap", f"--arch={target.arch}", "--variant=minbase", "--include=python3,python3-pip",
         suite, str(root), mirror],
        clock,
    )  # fmt: skip
    if code != 0:
        raise BaseImageError(f"debootstrap --arch={target.arch} {suite} failed ({code}):\n{output[-3000:]}")
    _trim(root)
    clock.say(f"debootstrap {suite} {target.arch} done; building {tag} from it")
    with (context / "root.tar").open("wb") as archive:
        tar = subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=archive, stderr=subprocess.PIPE,
            text=True, check=False,
        )  # fmt: skip
    if tar.returncode != 0:
        raise BaseImageError(f"archiving the stand-in's root failed: {tar.stderr.strip()}")
    shutil.rmtree(root)
    (context / "Dockerfile").write_text(STANDIN_DOCKERFILE, encoding="utf-8")
    platform = () if engine.platform is None else ("--platform", engine.platform)
    engine.run(
        "build", *platform, "--network=none", "--tag", tag, str(context),
        clock=clock, timeout=STANDIN_BUILD_TIMEOUT,
    )  # fmt: skip
    shutil.rmtree(work)


def _debootstrap(command: list[str], clock: Clock) -> tuple[int, str]:
    """Run debootstrap where :func:`stop_debootstraps` can end it; its exit code and output."""
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as process:
        _RUNNING.add(process)
        try:
            output, _ = process.communicate(timeout=clock.budget(DEBOOTSTRAP_TIMEOUT))
        except subprocess.TimeoutExpired as error:
            _kill(process)
            raise BaseImageError(
                f"`{' '.join(command[:2])} ... {command[-3]}` did not finish within {error.timeout:.0f} s"
            ) from None
        finally:
            _RUNNING.discard(process)
    return process.returncode, output


def stop_debootstraps() -> None:
    """End the debootstraps still running: the check failed, and their minutes would be spent for nothing."""
    for process in list(_RUNNING):
        _kill(process)


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _trim(root: Path) -> None:
    doomed = [path for pattern in TRIMMED for path in root.glob(pattern)]
    doomed += [path for path in (root / "usr/share/locale").iterdir() if path.name != "locale.alias"]
    doomed += list(root.glob("usr/**/__pycache__"))
    for path in doomed:
        _remove(path)
    # The official image's Python is not Debian's system Python: pip may install into it.
    for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    python = next(root.glob("usr/bin/python3.*[0-9]")).name
    for name in ("python", "python3", python):
        (root / "usr/local/bin" / name).symlink_to(f"/usr/bin/{python}")
