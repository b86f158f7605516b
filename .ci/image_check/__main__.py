"""``python -m image_check``: build the image per platform, report its size, smoke-test it (see __init__)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fake_dcmi.build import FakeLibraryBuildFailed

import image_check
from ascend_plugin import __version__
from image_check import base_image, build, emulation, fake_node, image_report, platforms, podman_cdi, smoke
from image_check.clock import Clock, OutOfTime
from image_check.engine import Engine, EngineError, NoEngine, engine, podman_engine
from image_check.fake_node import CDI_DEVICE, FakeNode
from image_check.platforms import Platform, Unavailable

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "ascend-device-plugin"
MODES = ("device", "cdi")  # the plugin's allocate modes the smoke test runs, on every platform
FAILURES = (
    EngineError,
    base_image.BaseImageError,
    image_report.ImageReportError,
    smoke.SmokeFailure,
    podman_cdi.CdiCheckError,
    fake_node.WrongArchitecture,
    FakeLibraryBuildFailed,
    OutOfTime,
    subprocess.TimeoutExpired,
)


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nox -s image --",
        description=image_check.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--engine", choices=("auto", "docker", "podman"), default="auto", help="auto: docker, else podman"
    )
    parser.add_argument(
        "--platforms",
        type=platforms.parse,
        default=platforms.DEFAULT,
        help=f"the platforms built and smoke-tested, comma-separated (default: {platforms.DEFAULT}); "
        "one this machine does not run natively runs under qemu",
    )
    parser.add_argument(
        "--tag", default="ascend-device-plugin:ci", help="the images built are <tag>-<arch> (...:ci-arm64)"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path.home() / ".cache" / "ascend-device-plugin" / "image-check",
        help="images and build cache of a dockerd started here (kept between runs)",
    )
    parser.add_argument("--fresh", action="store_true", help="empty the state directory first")
    parser.add_argument("--base-registry", help="a registry mirror holding the official Python image")
    parser.add_argument("--debian-mirror", default=base_image.DEFAULT_MIRROR, help="for the stand-in base")
    parser.add_argument("--ca-bundle", type=Path, help="CA bundle for the build (default: the one pip uses)")
    parser.add_argument("--index-url", help="package index for the build (default: the one pip uses)")
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds the whole check may take")
    parser.add_argument("--skip-file", type=Path, help="where to write why the check was skipped")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Made:
    """A platform's base, and the seconds it took to have it."""

    base: base_image.Base
    seconds: float


@dataclass(frozen=True)
class Checked:
    """A platform's image that passed: its figures, its fake node, what each step took, when it was done."""

    target: Platform
    image: str
    figures: image_report.Figures
    node: FakeNode
    seconds: dict[str, float]
    finished: float


def _ready(target: Platform, native: Platform | None, clock: Clock) -> Path:
    """What ``target`` needs here: qemu if foreign, a C compiler for it; Unavailable says what is missing."""
    if target != native:
        handler, done = emulation.ensure(target)
        for line in done:
            clock.say(line)
        clock.say(f"under emulation: {handler.describe()}")
    library, compiler = fake_node.fake_library(target, native=target == native)
    clock.say(f"fake libdcmi.so for {target.machine}: {library} ({compiler})")
    return library


def _transfer(source: Engine, target: Engine, image: str, clock: Clock) -> None:
    """Copy ``image`` from one engine's store to another's (docker save | podman load)."""
    with subprocess.Popen(
        source.command("save", image), stdout=subprocess.PIPE, env={**os.environ, **source.env}
    ) as save:
        loaded = subprocess.run(
            target.command("load"), stdin=save.stdout, capture_output=True, text=True,
            timeout=clock.budget(180), check=False,
        )  # fmt: skip
    if save.returncode != 0 or loaded.returncode != 0:
        raise EngineError(f"copying {image} to podman failed: {loaded.stderr.strip()}")


def _cdi(used: Engine, image: str, node: FakeNode, scratch: Path, clock: Clock) -> list[str]:
    """podman's verdict on the spec the plugin wrote, or why it cannot be had here."""
    if shutil.which("podman") is None:
        return ["cdi: podman check SKIPPED: podman is not installed (apt-get install podman)"]
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return ["cdi: podman check SKIPPED: it needs root and unshare for a private mount namespace"]
    podman = used if used.name == "podman" else podman_engine(scratch / "podman")
    if podman is not used:
        _transfer(used, podman, image, clock)
        clock.say(f"copied {image} to podman's own storage")
    return podman_cdi.check(
        podman, image, CDI_DEVICE, spec=node.cdi_dir / "huawei.com-npu.json", scratch=scratch, clock=clock
    )


def _base(used: Engine, target: Platform, args: argparse.Namespace, scratch: Path, clock: Clock) -> Made:
    """``target``'s base image (run in a thread of its own: a foreign debootstrap takes minutes)."""
    started = clock.elapsed()
    base = base_image.choose(
        used.on(target.name), ROOT / "Dockerfile", target,
        registry=args.base_registry, mirror=args.debian_mirror, scratch=scratch, clock=clock,
    )  # fmt: skip
    clock.say(f"base: {base.image} ({base.how}); its Python runs as {target.machine}")
    return Made(base, clock.elapsed() - started)


def _platform(
    used: Engine,
    target: Platform,
    library: Path,
    base: Future[Made],
    args: argparse.Namespace,
    *,
    ca: Path | None,
    index: str | None,
    scratch: Path,
    clock: Clock,
) -> Checked:
    """Build, figures, contents and smoke test of one platform's image, once its base is made."""
    on = used.on(target.name)
    image = f"{args.tag}-{target.arch}"
    made = base.result()
    seconds = {"base": made.seconds}
    mark = clock.elapsed()

    def step(name: str) -> None:
        nonlocal mark
        seconds[name], mark = clock.elapsed() - mark, clock.elapsed()

    build.build(on, ROOT, image, base=made.base, ca=ca, index=index, clock=clock)
    step("build")
    figures = image_report.measure(on, image, made.base, clock)
    for line in image_report.report(figures, image, made.base):
        clock.say(line)
    image_report.check_budgets(figures, made.base)
    for line in image_report.check_contents(on, image, made.base, DISTRIBUTION, clock):
        clock.say(line)
    step("report")

    node = FakeNode(scratch / f"node-{target.arch}", library)
    node.build()
    smoke.version(on, image, __version__, clock)
    with smoke.kubelet_on(node) as kubelet:
        smoke.doctor(on, image, node, clock)
        for mode in MODES:
            smoke.plugin(on, image, node, kubelet, mode=mode, clock=clock)
    step("smoke")
    return Checked(target, image, figures, node, seconds, clock.elapsed())


def _check(args: argparse.Namespace, scratch: Path, clock: Clock) -> list[str]:
    """Every platform that can be checked here, checked; the closing lines (figures, times, skips).

    The bases are made in parallel, the images built and smoke-tested one after
    the other, the native one first: a foreign debootstrap's minutes under qemu
    pass while the native image is checked.
    """
    native = platforms.host()
    skipped: dict[Platform, str] = {}
    with engine(args.engine, args.state_dir, scratch, clock) as used:
        clock.say(f"engine: {used.name} {used.version(clock)} ({' '.join(used.argv)})")
        clock.say(f"this machine: {native.name if native else os.uname().machine}")
        ready: dict[Platform, Path] = {}  # each platform that can be checked here, and its fake library
        for target in platforms.native_first(args.platforms, native):
            try:
                ready[target] = _ready(target, native, clock.tagged(target.name))
            except Unavailable as why:
                skipped[target] = str(why)
                clock.tagged(target.name).say(f"SKIPPED: {why}")
        if not ready:
            raise Unavailable("; ".join(f"{target.name}: {why}" for target, why in skipped.items()))
        ca, ca_source = build.ca_bundle(args.ca_bundle)
        index, index_source = build.index_url(args.index_url)
        clock.say(
            f"CA bundle for the build: {ca or '-'} ({ca_source}); index: {index or '-'} ({index_source})"
        )
        with ThreadPoolExecutor(max_workers=len(ready)) as pool:
            try:
                bases = [
                    pool.submit(_base, used, target, args, scratch, clock.tagged(target.name))
                    for target in ready
                ]
                checked = [
                    _platform(used, target, library, base, args, ca=ca, index=index, scratch=scratch,
                              clock=clock.tagged(target.name))
                    for (target, library), base in zip(ready.items(), bases, strict=True)
                ]  # fmt: skip
            finally:
                base_image.stop_debootstraps()  # only ever running here when a step failed
        on_native = next((item for item in checked if item.target == native), None)
        if on_native is not None:
            for line in _cdi(used, on_native.image, on_native.node, scratch, clock):
                clock.say(line)
    return _closing(checked, skipped)


def _closing(checked: list[Checked], skipped: dict[Platform, str]) -> list[str]:
    lines = ["images:"]
    lines += [f"  {image_report.summary(item.target.name, item.image, item.figures)}" for item in checked]
    lines.append("time (wall clock; the bases made in parallel, then each image built and smoke-tested):")
    first = checked[0]
    for item in checked:
        steps = ", ".join(f"{name} {took:.0f} s" for name, took in item.seconds.items())
        later = "" if item is first else f", {item.finished - first.finished:.0f} s after {first.target.name}"
        lines.append(f"  {item.target.name:<12} {steps}; done at {item.finished:.0f} s{later}")
    lines += [f"  {target.name:<12} SKIPPED: {why}" for target, why in skipped.items()]
    return lines


def _unmount_below(directory: Path) -> None:
    """Undo mounts an engine left under ``directory`` (podman's storage binds its overlay dir)."""
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(f"{directory}/")]
    for point in reversed(points):
        subprocess.run(["umount", "--lazy", point], check=False)


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    clock = Clock(args.budget)
    if args.fresh and args.state_dir.exists():
        clock.say(f"--fresh: removing {args.state_dir}")
        shutil.rmtree(args.state_dir)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    # In /tmp, not nox's $TMPDIR: unix socket paths (dockerd's, the plugin's) must stay under 108 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="adp-image-", dir="/tmp"))
    try:
        closing = _check(args, scratch, clock)
    except (NoEngine, Unavailable) as reason:
        what = "container engine" if isinstance(reason, NoEngine) else "platform"
        message = f"no {what} can be checked here: {reason}"
        print(f"SKIPPED: {message}", flush=True)
        if args.skip_file is not None:
            args.skip_file.write_text(message, encoding="utf-8")
        return 0
    except FAILURES as error:
        print(f"\nFAILED after {clock.elapsed():.0f} s: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        _unmount_below(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    for line in closing:
        clock.say(line)
    clock.say(f"image check passed in {clock.elapsed():.0f} s (budget {args.budget:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
