"""Build the real Kubernetes components from the Go module proxy, once per version, cached.

``k8s.io/kubernetes`` requires its staging modules at v0.0.0 and replaces them with folders that
module zips leave out, so ``go install k8s.io/kubernetes/cmd/kubelet@v1.X.Y`` cannot work: each
component is built inside a small wrapper module of ours that requires the release and pins every
staging module to its matching ``v0.X.Y``. etcd and containerd get a wrapper module too (their own
go.mod files carry replace directives). The binaries land in ``$ASCEND_E2E_CACHE`` (default
``~/.cache/ascend-device-plugin-e2e``), outside the checkout, with Go's own module and build caches
beside them, so a machine builds each version once. ``python tests/e2e/build.py`` builds what the
suite needs and prints where; docs/e2e.md says how long it takes.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

VERSIONS_FILE = Path(__file__).with_name("versions.toml")
VERSIONS = tomllib.loads(VERSIONS_FILE.read_text(encoding="utf-8"))
CACHE = Path(os.environ.get("ASCEND_E2E_CACHE", Path.home() / ".cache" / "ascend-device-plugin-e2e"))
LOG_TAIL = 40  # lines of a failed build's log in the error


class BuildFailed(Exception):
    """A component could not be built; the message names it and carries its log's tail."""


@dataclass(frozen=True)
class Recipe:
    """One wrapper module and the commands built from it."""

    name: str  # the cache folder: "kubernetes-1.37.2"
    requires: dict[str, str]  # module -> version
    replaces: dict[str, str]  # module -> "module version"
    commands: tuple[str, ...]  # package paths of main packages
    ldflags: str = "-s -w"
    go: str = "1.26.0"
    renames: tuple[tuple[str, str], ...] = ()  # (what go build names a binary, what we call it)

    def go_mod(self) -> str:
        lines = [f"module ascend-e2e/{self.name.split('-')[0]}", "", f"go {self.go}", "", "require ("]
        lines += [f"\t{module} {version}" for module, version in sorted(self.requires.items())]
        lines.append(")")
        if self.replaces:
            lines += ["", "replace ("]
            lines += [f"\t{module} => {target}" for module, target in sorted(self.replaces.items())]
            lines.append(")")
        return "\n".join(lines) + "\n"

    def tools_go(self) -> str:
        imports = "\n".join(f'\t_ "{command}"' for command in self.commands)
        return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"

    def key(self) -> str:
        text = "\0".join([self.go_mod(), self.tools_go(), self.ldflags, _go_version()])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def folder(self) -> Path:
        return CACHE / self.name

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    def names(self) -> list[str]:
        """The binaries this recipe makes (go names each after its package, major version aside)."""
        renamed = dict(self.renames)
        names = [re.sub(r"/v\d+$", "", command).rsplit("/", 1)[-1] for command in self.commands]
        return [renamed.get(name, name) for name in names]


def _go_version() -> str:
    return subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # The machine's Go is new enough for every pinned release; never reach for another toolchain.
    env.setdefault("GOTOOLCHAIN", "local")
    env["GOFLAGS"] = "-mod=mod"
    return env


def _staging_modules(version: str) -> list[str]:
    """The staging modules ``k8s.io/kubernetes`` ``version`` requires at v0.0.0 and replaces locally."""
    answer = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        capture_output=True,
        text=True,
        check=False,
        env=_go_env(),
        cwd=CACHE,
    )
    if answer.returncode != 0:
        raise BuildFailed(
            f"k8s.io/kubernetes v{version}: the module proxy did not serve it:\n{answer.stderr}"
        )
    go_mod = Path(json.loads(answer.stdout)["GoMod"]).read_text(encoding="utf-8")
    required = set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0$", go_mod, re.MULTILINE))
    local = set(re.findall(r"^\s+(k8s\.io/[\w.-]+) => \./staging/", go_mod, re.MULTILINE))
    return sorted(required & local)


def kubernetes(version: str) -> Recipe:
    minor = version.split(".")[1]
    staging = f"v0.{version.split('.', 1)[1]}"
    return Recipe(
        name=f"kubernetes-{version}",
        requires={"k8s.io/kubernetes": f"v{version}"},
        replaces={module: f"{module} {staging}" for module in _staging_modules(version)},
        commands=tuple(
            f"k8s.io/kubernetes/cmd/{name}"
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
        ),
        ldflags=" ".join(
            [
                "-s -w",
                f"-X k8s.io/component-base/version.gitVersion=v{version}",
                "-X k8s.io/component-base/version.gitMajor=1",
                f"-X k8s.io/component-base/version.gitMinor={minor}",
                "-X k8s.io/component-base/version.gitTreeState=clean",
            ]
        ),
    )


def etcd(version: str) -> Recipe:
    siblings = ("server/v3", "api/v3", "client/pkg/v3", "client/v3", "pkg/v3")
    return Recipe(
        name=f"etcd-{version}",
        requires={f"go.etcd.io/etcd/{module}": f"v{version}" for module in siblings},
        replaces={},
        commands=("go.etcd.io/etcd/server/v3",),
        renames=(("server", "etcd"),),
    )


def containerd(version: str) -> Recipe:
    base = "github.com/containerd/containerd/v2"
    return Recipe(
        name=f"containerd-{version}",
        requires={base: f"v{version}"},
        replaces={},
        commands=tuple(f"{base}/cmd/{name}" for name in ("containerd", "containerd-shim-runc-v2", "ctr")),
        ldflags=f"-s -w -X {base}/version.Version=v{version}",
        go="1.26.6",
    )


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One build of a folder at a time (two test sessions, or a session and a benchmark)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(command: Sequence[str], folder: Path, log: Path, what: str) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(
            command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=_go_env(), check=False
        )
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:])
        raise BuildFailed(f"{what}: `{' '.join(command)}` exited with {done.returncode}; {log}:\n{tail}")


def build(recipe: Recipe, *, say: bool = True) -> Recipe:
    """Build ``recipe`` unless its binaries are already in the cache; returns it."""
    stamp = recipe.folder / "built"
    if stamp.exists() and stamp.read_text(encoding="utf-8") == recipe.key():
        return recipe
    with _locked(recipe.folder):
        if stamp.exists() and stamp.read_text(encoding="utf-8") == recipe.key():
            return recipe
        started = time.monotonic()
        if say:
            print(f"building {recipe.name} into {recipe.bin} (once per version)", file=sys.stderr, flush=True)
        (recipe.folder / "go.mod").write_text(recipe.go_mod(), encoding="utf-8")
        (recipe.folder / "go.sum").unlink(missing_ok=True)
        (recipe.folder / "tools.go").write_text(recipe.tools_go(), encoding="utf-8")
        log = recipe.folder / "build.log"
        log.write_text("", encoding="utf-8")
        _run(["go", "mod", "tidy"], recipe.folder, log, recipe.name)
        shutil.rmtree(recipe.bin, ignore_errors=True)
        recipe.bin.mkdir()
        _run(
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                recipe.ldflags,
                "-o",
                f"{recipe.bin}/",
                *recipe.commands,
            ],
            recipe.folder,
            log,
            recipe.name,
        )
        for built, wanted in recipe.renames:
            (recipe.bin / built).rename(recipe.bin / wanted)
        stamp.write_text(recipe.key(), encoding="utf-8")
        if say:
            print(f"built {recipe.name} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return recipe


@dataclass(frozen=True)
class Binaries:
    """Where each command of one cluster is."""

    kubernetes_version: str
    kube: Recipe
    etcd: Recipe
    containerd: Recipe

    def path(self, command: str) -> Path:
        for recipe in (self.kube, self.etcd, self.containerd):
            if command in recipe.names():
                return recipe.bin / command
        raise KeyError(command)


def build_all(kubernetes_version: str) -> Binaries:
    """Every component of a one-node cluster of ``kubernetes_version``, built or found in the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    return Binaries(
        kubernetes_version,
        kube=build(kubernetes(kubernetes_version)),
        etcd=build(etcd(VERSIONS["etcd"]["version"])),
        containerd=build(containerd(VERSIONS["containerd"]["version"])),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes", default=VERSIONS["kubernetes"]["default"], help="release to build")
    options = parser.parse_args(argv)
    try:
        binaries = build_all(options.kubernetes)
    except BuildFailed as failed:
        print(failed, file=sys.stderr)
        return 1
    for recipe in (binaries.kube, binaries.etcd, binaries.containerd):
        print(f"{recipe.name}: {recipe.bin}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
