"""``python -m image_check``: build the image, report its size, smoke-test it; see __init__.py."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import image_check
from ascend_plugin import __version__
from image_check import base_image, build, image_report, podman_cdi, smoke
from image_check.clock import Clock, OutOfTime
from image_check.engine import Engine, EngineError, NoEngine, engine, podman_engine
from image_check.fake_node import CDI_DEVICE, FakeNode

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "ascend-device-plugin"
FAILURES = (
    EngineError,
    base_image.BaseImageError,
    image_report.ImageReportError,
    smoke.SmokeFailure,
    podman_cdi.CdiCheckError,
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
    parser.add_argument("--tag", default="ascend-device-plugin:ci", help="the image built")
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
    parser.add_argument("--budget", type=float, default=600.0, help="seconds the whole check may take")
    parser.add_argument("--skip-file", type=Path, help="where to write why the check was skipped")
    return parser.parse_args(argv)


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


def _check(args: argparse.Namespace, scratch: Path, clock: Clock) -> None:
    with engine(args.engine, args.state_dir, scratch, clock) as used:
        clock.say(f"engine: {used.name} {used.version(clock)} ({' '.join(used.argv)})")
        base = base_image.choose(
            used,
            ROOT / "Dockerfile",
            registry=args.base_registry,
            mirror=args.debian_mirror,
            scratch=scratch,
            clock=clock,
        )
        clock.say(f"base: {base.image} ({base.how})")
        ca, ca_source = build.ca_bundle(args.ca_bundle)
        index, index_source = build.index_url(args.index_url)
        clock.say(
            f"CA bundle for the build: {ca or '-'} ({ca_source}); index: {index or '-'} ({index_source})"
        )
        build.build(used, ROOT, args.tag, base=base, ca=ca, index=index, clock=clock)
        figures = image_report.measure(used, args.tag, base, clock)
        for line in image_report.report(figures, args.tag, base):
            clock.say(line)
        image_report.check_budgets(figures, base)
        for line in image_report.check_contents(used, args.tag, base, DISTRIBUTION, clock):
            clock.say(line)

        node = FakeNode(scratch / "node")
        node.build()
        smoke.version(used, args.tag, __version__, clock)
        with smoke.kubelet_on(node) as kubelet:
            smoke.doctor(used, args.tag, node, clock)
            for mode in ("device", "cdi"):
                smoke.plugin(used, args.tag, node, kubelet, mode=mode, clock=clock)
        for line in _cdi(used, args.tag, node, scratch, clock):
            clock.say(line)


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
        _check(args, scratch, clock)
    except NoEngine as reason:
        message = f"no container engine can run here: {reason}"
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
    clock.say(f"image check passed in {clock.elapsed():.0f} s (budget {args.budget:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
