"""Automation: ``nox -s tests`` is the test command of the README and of CI."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.default_venv_backend = "venv"

SOURCES = ["ascend_plugin", "backends", "tests", "bench", "proto", ".ci/image_check", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite (fake libdcmi.so is compiled with the system C compiler)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and formatting) and the import-layer contracts of ARCHITECTURE.md."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", *SOURCES)
    session.run("ruff", "format", "--check", *SOURCES)
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on our code and on the image check."""
    session.install("-e", ".[dev]")
    session.run("mypy")
    session.run("mypy", "-p", "image_check", env={"MYPYPATH": ".ci:tests"})


@nox.session
def image(session: nox.Session) -> None:
    """Build the image for linux/amd64 and linux/arm64, report sizes and layers, smoke-test each.

    The platform this machine does not run natively is built and run under qemu. The steps are in
    .ci/image_check; `nox -s image -- --help` lists the options. Skipped, with the reason, where no
    container engine can run at all; a platform this machine cannot emulate is skipped, with the reason.
    """
    session.install("-e", ".[demo]")
    skipped = Path(session.create_tmp()) / "image-skipped"
    skipped.unlink(missing_ok=True)
    session.run(
        "python",
        "-m",
        "image_check",
        "--skip-file",
        str(skipped),
        *session.posargs,
        env={"PYTHONPATH": ".ci:tests"},  # tests/fake_dcmi: the C fake libdcmi.so, built per platform
    )
    if skipped.exists():
        session.skip(skipped.read_text(encoding="utf-8"))


def _kubernetes_release(arguments: list[str]) -> tuple[str, list[str]]:
    """The release ``--kubernetes X`` names among ``arguments`` (else the pinned default), and the rest."""
    import tomllib

    release = tomllib.loads(Path("tests/e2e/versions.toml").read_text(encoding="utf-8"))["kubernetes"][
        "default"
    ]
    rest: list[str] = []
    words = iter(arguments)
    for word in words:
        if word == "--kubernetes":
            release = next(words)
        elif word.startswith("--kubernetes="):
            release = word.split("=", 1)[1]
        else:
            rest.append(word)
    return release, rest


@nox.session
def e2e(session: nox.Session) -> None:
    """The end-to-end suite on the real Kubernetes, built from source (docs/e2e.md).

    Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd and containerd from the
    Go module proxy once per version (cached outside the checkout, tests/e2e/versions.toml pins them),
    then runs tests/e2e against a one-node cluster of them. ``nox -s e2e -- --kubernetes 1.34.4`` runs
    another release; other arguments go to pytest. Needs root, Go, Debian's runc, containernetworking-plugins
    and busybox-static (.ci/run installs them).
    """
    release, rest = _kubernetes_release(list(session.posargs))
    session.install("-e", ".[test]")
    session.run("python", "tests/e2e/build.py", "--kubernetes", release)
    session.run("pytest", "tests/e2e", "--kubernetes", release, *rest)


@nox.session
def proto(session: nox.Session) -> None:
    """Regenerate ascend_plugin/kubelet_api from proto/."""
    session.install("-e", ".[dev]")
    session.run("python", "proto/generate.py")


@nox.session
def cffi(session: nox.Session) -> None:
    """Regenerate the committed cffi module of the DCMI binding."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "backends.dcmi.build_ffi")


# Benchmarks the bench session runs with smaller counts than their own defaults, and why.
BENCH_COUNTS = {
    # Its defaults take about 12 minutes (a 300 s CPU comparison, two 60 s intervals waited for).
    "bench/telemetry.py": [
        "--changes", "10", "--slow-changes", "1", "--cpu-seconds", "60", "--cpu-windows", "4",
        "--injections", "10",
    ],
}  # fmt: skip


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark and print its figures.

    Each runs at its own defaults but those of BENCH_COUNTS (bench/telemetry.py: about 5 minutes instead
    of 12; ``python bench/telemetry.py`` gives the full figures). The session passes no arguments on: to
    run one benchmark with other counts, run its script (``python bench/<name>.py --help``).
    """
    session.install("-e", ".[test]")
    for script in (
        "bench/kubelet_path.py",
        "bench/health.py",
        "bench/lane_hang.py",
        "bench/footprint.py",
        "bench/idle.py",
        "bench/import_rss.py",
        "bench/placement.py",
        "bench/fault_policy.py",
        "bench/dra.py",
        "bench/dra_hostile.py",
        "bench/dra_dynamic.py",
        "bench/vnpus.py",
        "bench/kubelet_soak.py",
        "bench/loop_stall.py",
        "bench/http_scrapers.py",
        "bench/config_reload.py",
        "bench/event_storm.py",
        "bench/hot_reset.py",
        "bench/telemetry.py",
    ):
        session.run("python", script, *BENCH_COUNTS.get(script, []))
