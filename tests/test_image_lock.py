"""The image installs exactly the locked packages: requirements.lock and requirements-build.lock.

Each lock pins every package to one version with the sha256 of each of its
files, and the Dockerfile has pip check them (``--require-hashes``) in both
stages, so two builds of one commit install the same bytes. The locks cover what
pyproject.toml asks for (and nothing of the test or demo extras), and are closed:
every dependency of a locked package is locked too. The command that regenerates
each is at its top, and docs/deployment.md gives it.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import dockerfile
import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"
BUILD_IN = ROOT / "requirements-build.in"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
REGENERATE = {
    LOCK: (
        "uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes "
        "-o requirements.lock"
    ),
    BUILD_LOCK: (
        "uv pip compile requirements-build.in --universal --python-version 3.11 --generate-hashes "
        "-o requirements-build.lock"
    ),
}
# The image's platforms: Python 3.11 on Linux, both architectures.
PLATFORMS = [
    default_environment()
    | {
        "python_version": "3.11",
        "python_full_version": "3.11.7",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_machine": machine,
    }
    for machine in ("x86_64", "aarch64")
]


@dataclass(frozen=True)
class Pin:
    requirement: Requirement
    hashes: tuple[str, ...]

    @property
    def name(self) -> NormalizedName:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> Version:
        (specifier,) = self.requirement.specifier
        return Version(specifier.version)


def pins(path: Path) -> dict[NormalizedName, Pin]:
    """The lock's entries: one requirement per logical line (continuations joined), with its hashes."""
    text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
    found = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, _, options = line.partition(" --hash=")
        hashes = tuple(re.findall(r"--hash=(\S+)", f"--hash={options}")) if options else ()
        pin = Pin(Requirement(spec), hashes)
        found[pin.name] = pin
    return found


def applies(requirement: Requirement, extras: frozenset[str] = frozenset()) -> bool:
    """Whether the requirement is needed on some platform of the image."""
    if requirement.marker is None:
        return True
    return any(
        requirement.marker.evaluate({**environment, "extra": extra})
        for environment in PLATFORMS
        for extra in (extras or {""})
    )


@pytest.mark.parametrize("path", [LOCK, BUILD_LOCK], ids=lambda p: p.name)
def test_every_entry_is_one_version_with_the_hashes_of_its_files(path: Path) -> None:
    entries = pins(path)
    assert entries
    for name, pin in entries.items():
        (specifier,) = pin.requirement.specifier
        assert specifier.operator == "==", name
        assert pin.hashes, f"{name} has no hash: pip --require-hashes would refuse the whole file"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", digest) for digest in pin.hashes), name


def test_the_lock_covers_every_dependency_of_the_plugin() -> None:
    locked = pins(LOCK)
    for dependency in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(dependency)
        pin = locked.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} is not in requirements.lock"
        assert pin.version in requirement.specifier, (requirement, pin.version)
        for extra in requirement.extras:  # betterproto2[grpclib]: the extra's requirements too
            extra_needs = importlib.metadata.requires(requirement.name) or []
            for need in map(Requirement, extra_needs):
                if need.marker is not None and need.marker.evaluate({**PLATFORMS[0], "extra": extra}):
                    assert canonicalize_name(need.name) in locked, (requirement.name, extra, need.name)


def vias(path: Path) -> dict[NormalizedName, set[str]]:
    """What each entry is there for, as the lock's own ``# via`` comments say."""
    found: dict[NormalizedName, set[str]] = {}
    current: NormalizedName | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            current = canonicalize_name(re.split(r"[=<>!;\s\[]", line, maxsplit=1)[0])
            found[current] = set()
        elif (
            current is not None
            and (match := re.match(r"\s*#\s+(?:via\s+)?([A-Za-z0-9._-]+)", line))
            and match.group(1) != "via"
        ):
            found[current].add(match.group(1))
    return found


def test_every_locked_package_is_there_for_the_plugin() -> None:
    """Nothing of the test or demo extras: each entry is the plugin's, or a locked package's, dependency."""
    reasons = vias(LOCK)
    assert reasons.keys() == pins(LOCK).keys()
    for name, via in reasons.items():
        assert via, name
        assert all(
            reason == "ascend-device-plugin" or canonicalize_name(reason) in reasons for reason in via
        ), (
            name,
            via,
        )
    for tool in ("grpcio", "pytest", "hypothesis", "grpcio-tools", "helm-python-sdk", "mypy", "nox"):
        assert tool not in reasons, tool


@pytest.mark.parametrize("path", [LOCK, BUILD_LOCK], ids=lambda p: p.name)
def test_the_lock_is_closed(path: Path) -> None:
    """What a locked package needs on the image's platforms is locked too (pip --no-deps relies on it).

    Checked from the metadata of the packages installed here, where their version is the locked one.
    """
    locked = pins(path)
    checked = 0
    for name, pin in locked.items():
        try:
            installed = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(installed.version) != pin.version:
            continue
        checked += 1
        for need in map(Requirement, installed.requires or []):
            if applies(need, frozenset(pin.requirement.extras)) and (
                need.marker is None or "extra" not in str(need.marker) or pin.requirement.extras
            ):
                assert canonicalize_name(need.name) in locked, (
                    f"{name} needs {need.name}, which is not locked"
                )
    assert checked, "no locked package installed here at its locked version: nothing was checked"


def test_the_build_lock_is_what_builds_the_wheel() -> None:
    wanted = {
        canonicalize_name(Requirement(entry).name): entry for entry in PYPROJECT["build-system"]["requires"]
    }
    listed = [
        line.strip()
        for line in BUILD_IN.read_text(encoding="utf-8").splitlines()
        if line.strip() and line[0] != "#"
    ]
    assert sorted(listed) == sorted(wanted.values()), "requirements-build.in is [build-system] requires"
    locked = pins(BUILD_LOCK)
    for name, entry in wanted.items():
        assert locked[name].version in Requirement(entry).specifier


@pytest.mark.parametrize("path", [LOCK, BUILD_LOCK], ids=lambda p: p.name)
def test_each_lock_says_how_to_make_it_again_and_the_docs_agree(path: Path) -> None:
    header = path.read_text(encoding="utf-8").splitlines()[:2]
    assert header[1].strip("# ") == REGENERATE[path]
    lines = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8").splitlines()
    assert REGENERATE[path] in [line.strip() for line in lines]


def _runs(stage_index: int) -> list[str]:
    commands = dockerfile.parse_file(str(ROOT / "Dockerfile"))
    stages: list[list[dockerfile.Command]] = []
    for command in commands:
        if command.cmd == "FROM":
            stages.append([])
        elif stages:
            stages[-1].append(command)
    return [command.value[0] for command in stages[stage_index] if command.cmd == "RUN"]


def pip_commands(stage_index: int) -> list[list[str]]:
    """Every pip invocation of a stage's RUNs, as words."""
    found = []
    for run in _runs(stage_index):
        for part in run.split("&&"):
            words = shlex.split(part)
            if "pip" in words:
                found.append(words[words.index("pip") + 1 :])
    return found


def test_the_builder_takes_every_package_it_fetches_from_a_lock() -> None:
    fetching = [words for words in pip_commands(0) if "--no-index" not in words]
    assert {words[words.index("-r") + 1] for words in fetching} == {LOCK.name, BUILD_LOCK.name}
    for words in fetching:
        assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(words), words
    (own,) = [words for words in pip_commands(0) if "--no-index" in words]
    assert {"--no-deps", "--no-build-isolation"} <= set(own), "our wheel: the locked backend, nothing fetched"


def test_the_runtime_stage_installs_the_lock_with_its_hashes() -> None:
    installs = [words for words in pip_commands(-1) if words[0] == "install"]
    locked = [words for words in installs if "-r" in words]
    assert len(locked) == 1
    assert {"--require-hashes", "--no-index", "--no-deps"} <= set(locked[0])
    assert locked[0][locked[0].index("-r") + 1].endswith("/" + LOCK.name)
    own = [words for words in installs if words is not locked[0]]
    assert own
    assert all("--no-deps" in words and "--no-index" in words for words in own), "nothing beyond the lock"
