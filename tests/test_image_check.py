"""The image check's own logic: what CI runs, the base it asks for, the budgets, the build's CA bundle.

The check itself needs a container engine and root, so it runs as ``nox -s image``
(in CI after the tests); these are the parts that can be held to account here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))

from image_check import base_image, build, image_report  # noqa: E402

CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def _line_of(command: str) -> int:
    (index,) = [index for index, line in enumerate(CI) if line.strip() == command]
    return index


def test_ci_runs_the_image_check_after_the_tests() -> None:
    assert _line_of("python3 -m nox -s lint typecheck") < _line_of("python3 -m nox -s image")


def test_ci_installs_the_engines_the_check_needs() -> None:
    script = "\n".join(CI)
    for package in ("docker.io", "podman", "debootstrap"):
        assert f"missing+=({package})" in script
    assert 'apt-get install -y -qq "${missing[@]}"' in script


def test_ci_installs_the_c_compiler_before_the_tests() -> None:
    """The tests compile the fake libdcmi.so; a fresh machine may have no compiler."""
    assert "missing+=(gcc)" in "\n".join(
        CI[: _line_of("python3 -m pip install nox && python3 -m nox -s tests")]
    )


def test_the_image_check_is_not_a_default_session() -> None:
    """It needs an engine and root: `nox` alone runs what any machine can."""
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert 'nox.options.sessions = ["tests", "lint", "typecheck"]' in noxfile
    assert "def image(session: nox.Session)" in noxfile


@pytest.mark.parametrize(
    ("registry", "expected"),
    [
        (None, "docker.io/library/python:3.11-slim-bookworm"),
        ("mirror.example.com:5000", "mirror.example.com:5000/library/python:3.11-slim-bookworm"),
    ],
)
def test_the_official_base_is_the_dockerfiles_default(registry: str | None, expected: str) -> None:
    assert base_image.official_base(ROOT / "Dockerfile", registry) == expected


def test_the_stand_in_debian_release_has_the_dockerfiles_python() -> None:
    args = base_image.dockerfile_args(ROOT / "Dockerfile")
    suite = args["BASE_IMAGE"].rpartition("-slim-")[2]
    assert base_image.DEBIAN_PYTHON[suite] == args["PYTHON_VERSION"]


def _figures(total_mb: float, base_mb: float) -> image_report.Figures:
    mb = image_report.MB
    return image_report.Figures(int(total_mb * mb), int(base_mb * mb), (), 2, 1)


OFFICIAL = base_image.Base("docker.io/library/python:3.11-slim-bookworm", True, "pulled", ())
STANDIN = base_image.Base("ascend-ci-base:3.11-bookworm", False, "built", ("BASE_IMAGE=x",))


@pytest.mark.parametrize("base", [OFFICIAL, STANDIN])
def test_more_than_60_mb_above_the_base_fails(base: base_image.Base) -> None:
    image_report.check_budgets(_figures(180, 120), base)
    with pytest.raises(image_report.ImageReportError, match=r"take 60\.1 MB; the budget is 60 MB"):
        image_report.check_budgets(_figures(180.1, 120), base)


def test_the_whole_image_budget_holds_on_the_official_base_only() -> None:
    with pytest.raises(image_report.ImageReportError, match=r"takes 201\.0 MB; the budget is 200 MB"):
        image_report.check_budgets(_figures(201, 150), OFFICIAL)
    image_report.check_budgets(_figures(201, 150), STANDIN)
    assert "not comparable" in image_report.report(_figures(201, 150), "x:ci", STANDIN)[-1]


def test_the_build_gets_the_ca_bundle_pip_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_CERT", str(bundle))
    assert build.ca_bundle(None) == (bundle, "$PIP_CERT")
    assert build.ca_bundle(tmp_path / "given.pem") == (tmp_path / "given.pem", "--ca-bundle")


def test_a_ca_bundle_that_does_not_exist_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "gone.pem"))
    found, _ = build.ca_bundle(None)
    assert found != tmp_path / "gone.pem"
