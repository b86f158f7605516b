"""The image: our wheel on a Python base whose glibc the hosts' libraries accept.

What an engine shows (the image builds for each platform, ``version`` and
``doctor`` run in it, the plugin serves the kubelet stand-in from a hardened
container, no compiler and no byte code are in it, the size budgets hold) is
``nox -s image``'s (.ci/image_check), with a real engine. Here, without one, the
Dockerfile is read as the engine reads it (BuildKit's own parser, the
``dockerfile`` package) and linted by hadolint, and what it promises is held
against what makes it true: the console script pyproject.toml installs and the
CLI's parser, the build arguments and secret the docs tell operators to pass,
the glibc the hosts' libraries need, and the chart's paths, port and read-only
root.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_plugin import __version__
from ascend_plugin.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The glibc of the Debian release a python:<version>-slim-<codename> image is built on.
DEBIAN_GLIBC = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41)}
# The host's libdcmi.so and driver libraries load into the image's Python, and a
# library runs only on a glibc at least as new as the one it was built against:
# the drivers' hosts go back to Ubuntu 22.04 (2.35) and openEuler 22.03 (2.34).
# docs/deployment.md promises a base of at least this.
MIN_GLIBC = (2, 35)

BASE_IMAGE = re.compile(
    r"^(?P<registry>[^/]+)/library/python:(?P<python>\d+\.\d+)-slim-(?P<codename>[a-z]+)$"
)
# What would put a compiler (or anything else unvetted) into the final stage.
PACKAGE_MANAGERS = {"apt", "apt-get", "aptitude", "dpkg", "apk", "yum", "dnf", "microdnf"}
COMPILERS = {"gcc", "cc", "c++", "g++", "clang", "make", "build-essential"}
# PYTHON_VERSION is no operator's knob: the chart's hostLoader and requires-python follow it.
UNDOCUMENTED_ARGS = {"PYTHON_VERSION"}


@cache
def instructions() -> tuple[dockerfile.Command, ...]:
    return tuple(dockerfile.parse_file(str(DOCKERFILE)))


def stages() -> list[list[dockerfile.Command]]:
    """The instructions of each build stage, from its FROM on."""
    result: list[list[dockerfile.Command]] = []
    for command in instructions():
        if command.cmd == "FROM":
            result.append([])
        if result:
            result[-1].append(command)
    return result


def global_args() -> dict[str, str]:
    """ARG defaults declared before the first FROM (usable in FROM lines)."""
    args: dict[str, str] = {}
    for command in instructions():
        if command.cmd == "FROM":
            break
        if command.cmd == "ARG":
            name, _, default = command.value[0].partition("=")
            args[name] = default
    return args


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with ``$NAME`` and ``${NAME}`` replaced, as the Dockerfile's own expansion does."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), ""), text)


def bases(build_args: Mapping[str, str] | None = None) -> list[str]:
    """Each stage's base image as the build resolves it, given ``--build-arg`` values.

    The global ARGs are read in order, each default expanded with those before
    it, a ``--build-arg`` replacing the default; FROM lines expand with the result.
    """
    given = build_args or {}
    values: dict[str, str] = {}
    for name, default in global_args().items():
        values[name] = given.get(name, substitute(default, values))
    return [substitute(stage[0].value[0], values) for stage in stages()]


def env_of(stage: list[dockerfile.Command]) -> dict[str, str]:
    values = [value for command in stage if command.cmd == "ENV" for value in command.value]
    return dict(zip(values[::2], values[1::2], strict=True))


def runs(stage: list[dockerfile.Command], program: str) -> list[dockerfile.Command]:
    """The RUN instructions of ``stage`` whose shell command contains ``program``."""
    return [command for command in stage if command.cmd == "RUN" and program in command.value[0]]


def user_at(stage: list[dockerfile.Command], instruction: dockerfile.Command) -> str:
    """The USER in effect when ``instruction`` runs (root unless a USER came before it)."""
    users = [command.value[0] for command in stage[: stage.index(instruction)] if command.cmd == "USER"]
    return users[-1] if users else "0"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def chart_values() -> dict[str, Any]:
    data = yaml.safe_load(
        (ROOT / "charts" / "ascend-device-plugin" / "values.yaml").read_text(encoding="utf-8")
    )
    assert isinstance(data, dict)
    return data


def docs_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


def test_hadolint_finds_nothing() -> None:
    """hadolint's rules, down to "info"; the one deliberate exception (root) is annotated in place."""
    hadolint = Path(sys.executable).with_name("hadolint")
    result = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("stage", range(len(stages())))
def test_every_stage_is_python_slim_with_a_new_enough_glibc(stage: int) -> None:
    image = bases()[stage]
    match = BASE_IMAGE.match(image)
    assert match, f"stage {stage} builds on {image}, not python:<version>-slim-<debian>"
    assert match["python"] == global_args()["PYTHON_VERSION"]
    assert DEBIAN_GLIBC[match["codename"]] >= MIN_GLIBC, f"{match['codename']}: glibc too old for the hosts"
    assert not [flag for flag in stages()[stage][0].flags if flag.startswith("--platform")], (
        "a pinned platform would build one architecture whatever --platform asks"
    )


def test_the_glibc_the_docs_promise_is_the_one_checked() -> None:
    """An operator picking another BASE_IMAGE goes by the documented minimum."""
    promised = {
        (int(major), int(minor))
        for major, minor in re.findall(r"glibc of at least (\d+)\.(\d+)", docs_text())
    }
    assert promised == {MIN_GLIBC}


def test_base_registry_is_a_build_argument() -> None:
    """Where Docker Hub times out, --build-arg BASE_REGISTRY=<mirror> changes every base."""
    mirrored = bases({"BASE_REGISTRY": "mirror.example:5000"})
    assert mirrored == [image.replace("docker.io/", "mirror.example:5000/", 1) for image in bases()]
    # BASE_IMAGE replaces the base as a whole (CI's stand-in): every stage's.
    assert bases({"BASE_IMAGE": "stand-in:py3.11"}) == ["stand-in:py3.11"] * len(stages())


def test_the_default_base_is_the_official_slim_image() -> None:
    """Without build arguments every stage is on Docker Hub's official image."""
    assert set(bases()) == {"docker.io/library/python:3.11-slim-bookworm"}


def test_no_syntax_directive() -> None:
    """A ``# syntax=`` line makes BuildKit pull a frontend image from Docker Hub before anything else.

    Then no BASE_REGISTRY or PIP_INDEX_URL can make the build work where Docker
    Hub is unreachable; the engine's built-in frontend has all we use.
    """
    directive = re.compile(r"^\s*#\s*(syntax|check)\s*=", re.IGNORECASE)
    assert [
        line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines() if directive.match(line)
    ] == []


def index_runs() -> list[dockerfile.Command]:
    """The builder's RUNs whose pip reaches the package index: the locked dependencies, the build backend."""
    found = [
        command for command in runs(stages()[0], "pip") if "--no-index" not in shlex.split(command.value[0])
    ]
    assert len(found) == 2, [command.original for command in found]
    return found


def test_every_build_argument_the_docs_name_takes_effect() -> None:
    """What the docs tell an operator to pass (--build-arg, --secret) is what the build takes, and acts on."""
    documented = set(re.findall(r"--build-arg (\w+)=", docs_text()))
    assert documented, "the docs say how to build behind a mirror"
    builder = stages()[0]
    stage_args = {command.value[0].partition("=")[0]: command for command in builder if command.cmd == "ARG"}
    assert documented | UNDOCUMENTED_ARGS == set(global_args()) | set(stage_args), "documented = declared"
    for name in documented:
        if name in global_args():
            # A global ARG acts through the FROM lines: passing it changes the base of every stage.
            changed = bases({name: "given.example/x"})
            assert all(a != b for a, b in zip(changed, bases(), strict=True)), name
        else:
            # A stage's ARG is in the environment of the RUNs after it: pip reads PIP_* from there.
            assert name.startswith("PIP_"), name
            assert all(builder.index(stage_args[name]) < builder.index(run) for run in index_runs()), name
    # No index is reached at run time: the final stage takes no index URL.
    assert not [command for command in stages()[-1] if command.cmd == "ARG"]
    secrets = {
        option.removeprefix("id=")
        for command in instructions()
        for flag in command.flags
        if flag.startswith("--mount=type=secret")
        for option in flag.split(",")
        if option.startswith("id=")
    }
    assert set(re.findall(r"--secret id=([\w-]+)", docs_text())) == secrets


@pytest.mark.parametrize("which", [0, 1], ids=["dependencies", "build backend"])
def test_the_builder_trusts_a_ca_bundle_given_as_a_build_secret(tmp_path: Path, which: int) -> None:
    """A TLS-intercepting proxy or private index: its CA bundle comes in as a secret, never a layer."""
    builder, install = stages()[0], index_runs()[which]
    (mount,) = [flag for flag in install.flags if flag.startswith("--mount=type=secret")]
    options = dict(option.partition("=")[::2] for option in mount.removeprefix("--mount=").split(","))
    assert options["uid"] == user_at(builder, install), "readable by the user that runs pip"
    secret = options.get("target", f"/run/secrets/{options['id']}")  # where BuildKit mounts it
    # What the RUN does before pip, run by a shell with the secret mounted and without.
    before_pip, _, pip = install.value[0].rpartition("&&")
    assert "pip wheel" in pip or "pip install" in pip

    def pip_cert(bundle: Path) -> str:
        script = before_pip.replace(secret, str(bundle)) + ' && printf %s "${PIP_CERT-}"'
        done = subprocess.run(
            ["sh", "-c", script], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True
        )
        return done.stdout

    bundle = tmp_path / "ca-bundle"
    assert pip_cert(bundle) == "", "without the secret, pip's own CA certificates"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    assert pip_cert(bundle) == str(bundle)
    copied = [source for command in builder if command.cmd in {"COPY", "ADD"} for source in command.value]
    assert not [source for source in copied if re.search(r"\.(pem|crt)$|cert", source)]


def test_python_version_satisfies_requires_python() -> None:
    python = Version(global_args()["PYTHON_VERSION"])
    assert python in SpecifierSet(pyproject()["project"]["requires-python"])


def test_entrypoint_is_the_console_script_running_the_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    final = stages()[-1]
    (entrypoint,) = [command for command in final if command.cmd == "ENTRYPOINT"]
    (default_args,) = [command for command in final if command.cmd == "CMD"]
    assert entrypoint.json, "exec form: the plugin is PID 1 and gets the kubelet's SIGTERM itself"
    (script,) = entrypoint.value
    # pip installs a console script per [project.scripts] entry into the base Python's bin
    # directory, which stays on PATH; the script calls the function its entry names.
    assert "PATH" not in env_of(final)
    module, _, function = pyproject()["project"]["scripts"][script].partition(":")
    assert getattr(importlib.import_module(module), function) is main
    # The default arguments are the daemon's command, as the CLI parses them.
    assert build_parser().parse_args(list(default_args.value)).command == "run"
    # The build proves the installed script runs by running it: what it prints is the version.
    (install,) = runs(final, "pip install")
    assert shlex.split(install.value[0].rpartition("&&")[2]) == [script, "version"]
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"{__version__}\n"


def test_builds_as_a_user_runs_as_root() -> None:
    """The build needs no root; the plugin does (device nodes, the kubelet's socket directory)."""
    builder, final = stages()[0], stages()[-1]
    for run in runs(builder, "pip"):
        assert user_at(builder, run).split(":")[0] not in {"0", "root"}
    assert [command.value[0] for command in final if command.cmd == "USER"][-1] == "0:0"


def test_runtime_stage_installs_only_the_builders_wheels() -> None:
    (install,) = runs(stages()[-1], "pip install")
    words = shlex.split(install.value[0])
    assert "--no-index" in words, "no index is reached in the final stage"
    (mount,) = [flag for flag in install.flags if flag.startswith("--mount=type=bind,from=builder")]
    target = dict(option.partition("=")[::2] for option in mount.split(","))["target"]
    # The wheel named is the one the builder makes of this project (PEP 427's name form).
    project = pyproject()["project"]
    wheel = f"{canonicalize_name(project['name']).replace('-', '_')}-{__version__}-py3-none-any.whl"
    (named,) = [word for word in words if word.endswith(".whl")]
    assert named.startswith(f"{target}/")
    assert fnmatch.fnmatchcase(wheel, Path(named).name)
    assert not [command for command in stages()[-1] if command.cmd in {"COPY", "ADD"}], (
        "no wheel left in a layer"
    )


def test_no_compiler_in_the_final_stage() -> None:
    """Nothing installed from a package manager, and pip installs only the builder's wheels: nothing to build.

    The slim base has no compiler; the image check looks inside the built image too.
    """
    for command in runs(stages()[-1], ""):
        words = set(shlex.split(command.value[0]))
        assert not words & (PACKAGE_MANAGERS | COMPILERS), command.original
        if "pip" in words:
            assert "--no-index" in words, command.original


def test_nothing_depends_on_the_architecture() -> None:
    """One Dockerfile for linux/arm64 and linux/amd64."""
    arch = re.compile(r"amd64|x86_64|aarch64|arm64|armv8")
    assert [command.original for command in instructions() if arch.search(command.original)] == []


def test_library_path_and_port_are_the_charts() -> None:
    final = stages()[-1]
    assert env_of(final)["LD_LIBRARY_PATH"].split(":") == chart_values()["libraryPath"]
    (expose,) = [command for command in final if command.cmd == "EXPOSE"]
    assert list(expose.value) == [str(chart_values()["httpPort"])]


def test_the_charts_host_loader_finds_the_images_python() -> None:
    host_loader = chart_values()["hostLoader"]
    assert host_loader["python"] == f"/usr/local/bin/python{global_args()['PYTHON_VERSION']}"
    assert host_loader["pythonLibraryDir"] == "/usr/local/lib"


def test_bytecode_is_never_written_at_run_time() -> None:
    """The chart mounts the image read-only: Python must not try to write byte code beside the modules."""
    assert chart_values()["securityContext"]["readOnlyRootFilesystem"] is True
    assert env_of(stages()[-1])["PYTHONDONTWRITEBYTECODE"] == "1"


# -- The build context ----------------------------------------------------------------


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context.

    Docker's rules, as far as this .dockerignore uses them: lines in order,
    the last matching line wins, "!" re-includes, and a pattern that matches a
    directory matches everything below it.
    """
    parts = path.split("/")
    candidates = ["/".join(parts[: index + 1]) for index in range(len(parts))]
    verdict = False
    for raw in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line.removeprefix("!").rstrip("/")
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            verdict = not include
    return verdict


def copied_sources() -> set[str]:
    return {
        source
        for command in stages()[0]
        if command.cmd == "COPY" and not any(flag.startswith("--from") for flag in command.flags)
        for source in command.value[:-1]
    }


def test_build_context_holds_what_the_wheel_needs() -> None:
    project = pyproject()
    needed = {
        "requirements.lock",  # the dependencies, pinned with hashes (tests/test_image_lock.py)
        "requirements-build.lock",  # the build backend, the same way
        "pyproject.toml",
        project["project"]["readme"],
        *project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"],
    }
    assert copied_sources() == needed
    for source in needed:
        path = ROOT / source
        # Package data too (fault_levels.json, py.typed): everything but byte code.
        files = (
            [path]
            if path.is_file()
            else [f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
        )
        assert files, source
        assert [str(item) for item in files if ignored(str(item.relative_to(ROOT)))] == []


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/config",
        "tests/conftest.py",
        "charts/ascend-device-plugin/values.yaml",
        "ascend_plugin/__pycache__/cli.cpython-311.pyc",
    ],
)
def test_build_context_leaves_out_the_rest(path: str) -> None:
    assert ignored(path)
