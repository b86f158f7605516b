"""The image: our wheel on a Python base whose glibc the hosts' libraries accept.

The Dockerfile is checked as text here: parsed by BuildKit's own parser (the
`dockerfile` package) and linted by hadolint, then held against pyproject.toml
and the chart, which make promises about the image. ``nox -s image`` builds it
with a real engine and runs it (.ci/image/).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"

# The glibc of the Debian release a python:<version>-slim-<codename> image is built on.
DEBIAN_GLIBC = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41)}
# Ubuntu 22.04's glibc: the field report's working image had it, so the hosts'
# libdcmi.so loads with it; an older one is what pitfall 4 is made of.
MIN_GLIBC = (2, 35)

BASE_IMAGE = re.compile(
    r"^(?P<registry>[^/]+)/library/python:(?P<python>\d+\.\d+)-slim-(?P<codename>[a-z]+)$"
)


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


def expand(text: str) -> str:
    """``text`` with the global ARG defaults substituted, including those that name other ARGs."""
    reference = re.compile(r"\$\{(\w+)\}|\$(\w+)")
    while reference.search(text):
        text = reference.sub(lambda m: global_args()[m.group(1) or m.group(2)], text)
    return text


def env_of(stage: list[dockerfile.Command]) -> dict[str, str]:
    values = [value for command in stage if command.cmd == "ENV" for value in command.value]
    return dict(zip(values[::2], values[1::2], strict=True))


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def chart_values() -> dict[str, Any]:
    data = yaml.safe_load(
        (ROOT / "charts" / "ascend-device-plugin" / "values.yaml").read_text(encoding="utf-8")
    )
    assert isinstance(data, dict)
    return data


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
    image = expand(stages()[stage][0].value[0])
    match = BASE_IMAGE.match(image)
    assert match, f"stage {stage} builds on {image}, not python:<version>-slim-<debian>"
    assert match["python"] == global_args()["PYTHON_VERSION"]
    assert DEBIAN_GLIBC[match["codename"]] >= MIN_GLIBC, f"{match['codename']}: glibc too old for the hosts"
    assert not [flag for flag in stages()[stage][0].flags if flag.startswith("--platform")], (
        "no pinned platform"
    )


def test_base_registry_is_a_build_argument() -> None:
    """Pitfall 8: where Docker Hub times out, --build-arg BASE_REGISTRY=<mirror> changes every base."""
    assert global_args()["BASE_REGISTRY"] == "docker.io"
    assert global_args()["BASE_IMAGE"].startswith("${BASE_REGISTRY}/")
    assert [stage[0].value[0] for stage in stages()] == ["${BASE_IMAGE}"] * len(stages())


def test_the_default_base_is_the_official_slim_image() -> None:
    """BASE_IMAGE replaces the base as a whole (CI's stand-in); by default it is Docker Hub's."""
    assert expand(global_args()["BASE_IMAGE"]) == "docker.io/library/python:3.11-slim-bookworm"


def test_no_syntax_directive() -> None:
    """A ``# syntax=`` line makes BuildKit pull a frontend image from Docker Hub before anything else.

    Then no BASE_REGISTRY or PIP_INDEX_URL can make the build work where Docker
    Hub is unreachable; the engine's built-in frontend has all we use.
    """
    directive = re.compile(r"^\s*#\s*(syntax|check)\s*=", re.IGNORECASE)
    assert [
        line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines() if directive.match(line)
    ] == []


def builder_install() -> dockerfile.Command:
    (install,) = [
        command for command in stages()[0] if command.cmd == "RUN" and "pip wheel" in command.value[0]
    ]
    return install


def test_the_builder_takes_the_index_url_as_a_build_argument() -> None:
    assert [command.value[0] for command in stages()[0] if command.cmd == "ARG"] == ["PIP_INDEX_URL"]


def test_the_builder_trusts_a_ca_bundle_given_as_a_build_secret() -> None:
    """A TLS-intercepting proxy or private index: its CA bundle comes in as a secret, never a layer."""
    builder = stages()[0]
    (mount,) = [flag for flag in builder_install().flags if flag.startswith("--mount=type=secret")]
    options = dict(option.partition("=")[::2] for option in mount.removeprefix("--mount=").split(","))
    user = [command.value[0] for command in builder if command.cmd == "USER"][-1]
    assert options == {"type": "secret", "id": "ca-bundle", "uid": user}  # readable by the builder
    secret = f"/run/secrets/{options['id']}"
    # Without the secret the build uses pip's own CA certificates.
    assert builder_install().value[0].startswith(f"if [ -s {secret} ]; then export PIP_CERT={secret}; fi")
    copied = [source for command in builder if command.cmd in {"COPY", "ADD"} for source in command.value]
    assert not [source for source in copied if re.search(r"\.(pem|crt)$|cert", source)]


def test_python_version_satisfies_requires_python() -> None:
    python = Version(global_args()["PYTHON_VERSION"])
    assert python in SpecifierSet(pyproject()["project"]["requires-python"])


def test_entrypoint_is_the_console_script_running_the_daemon() -> None:
    final = stages()[-1]
    (entrypoint,) = [command for command in final if command.cmd == "ENTRYPOINT"]
    (default_args,) = [command for command in final if command.cmd == "CMD"]
    scripts = pyproject()["project"]["scripts"]
    assert entrypoint.json
    assert list(entrypoint.value) == ["ascend-device-plugin"]
    assert scripts["ascend-device-plugin"] == "ascend_plugin.cli:main"
    assert list(default_args.value) == ["run"]


def test_builds_as_a_user_runs_as_root() -> None:
    """The build needs no root; the plugin does (device nodes, the kubelet's socket directory)."""
    builder, final = stages()[0], stages()[-1]
    builder_users = [command.value[0] for command in builder if command.cmd == "USER"]
    assert builder_users
    assert builder_users[-1].split(":")[0] not in {"0", "root"}
    assert [command.value[0] for command in final if command.cmd == "USER"][-1] == "0:0"


def test_runtime_stage_installs_only_the_builders_wheels() -> None:
    (install,) = [
        command for command in stages()[-1] if command.cmd == "RUN" and "pip install" in command.value[0]
    ]
    assert "--no-index" in install.value[0]
    assert [flag for flag in install.flags if flag.startswith("--mount=type=bind,from=builder")]
    assert not [command for command in stages()[-1] if command.cmd in {"COPY", "ADD"}], (
        "no wheel left in a layer"
    )


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
    """The chart mounts the image read-only."""
    assert env_of(stages()[-1])["PYTHONDONTWRITEBYTECODE"] == "1"


def test_no_bytecode_in_the_image() -> None:
    """Byte code would be 33 of the 81 MB the install layer had; Python compiles in memory at start."""
    (install,) = [
        command for command in stages()[-1] if command.cmd == "RUN" and "pip install" in command.value[0]
    ]
    assert "--no-compile" in install.value[0].split()


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
