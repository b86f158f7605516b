"""The image's size and layers, and what must not be in it.

Budgets: the layers above the base at most 60 MB, the whole image at most
200 MB on the official slim base (sizes as the engines print them: 1 MB =
10^6 bytes), the same for every platform. On a stand-in base the whole-image
figure is reported but not held to the budget: the stand-in's size is not the
official image's.

The contents check runs in the image: no compiler, no byte-code cache
anywhere, and every distribution installed above the base is one the plugin
needs (its requirements, followed transitively), so no test dependency.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from image_check.base_image import Base
from image_check.clock import Clock
from image_check.engine import Engine

MB = 1_000_000
LAYERS_BUDGET = 60 * MB
WHOLE_BUDGET = 200 * MB


class ImageReportError(RuntimeError):
    """The image breaks a budget or holds what it must not."""


@dataclass(frozen=True)
class Layer:
    size: int
    created_by: str


@dataclass(frozen=True)
class Figures:
    total: int
    base_total: int
    layers: tuple[Layer, ...]  # above the base, newest first, empty (metadata) ones left out
    layer_count: int
    base_layer_count: int

    @property
    def above_base(self) -> int:
        return self.total - self.base_total


def _size(engine: Engine, image: str, clock: Clock) -> tuple[int, int]:
    """Bytes and file-system layer count of ``image``."""
    out = engine.run(
        "image", "inspect", "--format", "{{.Size}} {{len .RootFS.Layers}}", image, clock=clock
    ).stdout.split()
    return int(out[0]), int(out[1])


def _history(engine: Engine, image: str, clock: Clock) -> list[Layer]:
    """The image's history entries, newest first, sizes in bytes (each engine has its own format)."""
    if engine.name == "podman":
        entries = json.loads(engine.run("history", "--format", "json", image, clock=clock).stdout)
        return [Layer(int(entry["size"]), entry["CreatedBy"]) for entry in entries]
    lines = engine.run(
        "history", "--human=false", "--no-trunc", "--format", "{{json .}}", image, clock=clock
    ).stdout.splitlines()
    return [Layer(int(entry["Size"]), entry["CreatedBy"]) for entry in map(json.loads, lines)]


def measure(engine: Engine, image: str, base: Base, clock: Clock) -> Figures:
    total, count = _size(engine, image, clock)
    base_total, base_count = _size(engine, base.image, clock)
    entries = _history(engine, image, clock)
    own = entries[: len(entries) - len(_history(engine, base.image, clock))]  # the base's come last
    return Figures(total, base_total, tuple(layer for layer in own if layer.size > 0), count, base_count)


def report(figures: Figures, image: str, base: Base) -> list[str]:
    """The figures as lines for the check's output."""
    lines = [
        f"image {image}: {figures.total / MB:.1f} MB in {figures.layer_count} layers",
        f"  base {base.image} ({base.how}): {figures.base_total / MB:.1f} MB "
        f"in {figures.base_layer_count} layers",
        f"  layers above the base: {figures.above_base / MB:.1f} MB (budget {LAYERS_BUDGET / MB:.0f} MB)",
    ]
    lines += [f"    {layer.size / MB:7.1f} MB  {layer.created_by[:120]}" for layer in figures.layers]
    if base.official:
        lines.append(f"  whole image: {figures.total / MB:.1f} MB (budget {WHOLE_BUDGET / MB:.0f} MB)")
    else:
        lines.append(
            f"  whole image: {figures.total / MB:.1f} MB on the stand-in base; not comparable with the "
            f"{WHOLE_BUDGET / MB:.0f} MB budget, which is for the official slim base"
        )
    return lines


def summary(platform: str, image: str, figures: Figures) -> str:
    """One line per platform for the check's closing table."""
    return (
        f"{platform:<12} {image}: {figures.total / MB:6.1f} MB in {figures.layer_count} layers, "
        f"{figures.above_base / MB:5.1f} MB above its base ({figures.base_total / MB:.1f} MB, "
        f"{figures.base_layer_count} layers; budget above it {LAYERS_BUDGET / MB:.0f} MB)"
    )


def check_budgets(figures: Figures, base: Base) -> None:
    if figures.above_base > LAYERS_BUDGET:
        raise ImageReportError(
            f"the layers above the base take {figures.above_base / MB:.1f} MB; the budget is "
            f"{LAYERS_BUDGET / MB:.0f} MB"
        )
    if base.official and figures.total > WHOLE_BUDGET:
        raise ImageReportError(
            f"the image takes {figures.total / MB:.1f} MB; the budget is {WHOLE_BUDGET / MB:.0f} MB"
        )


# Run by the image's own Python (pip's vendored packaging evaluates the requirement markers).
_INSPECT = r"""
import json, os, shutil, sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

def needed(root):
    extras_of, todo = {}, [(root, frozenset())]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if key in extras_of and extras <= extras_of[key]:
            continue
        extras_of[key] = extras_of.get(key, frozenset()) | extras
        for text in metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in extras_of[key] or {""}]
            if requirement.marker is None or any(requirement.marker.evaluate(e) for e in environments):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return sorted(extras_of)

bytecode = []
for top, dirs, files in os.walk("/"):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in {"proc", "sys", "dev"}]
    if os.path.basename(top) == "__pycache__":
        bytecode.append(top)
    bytecode += [os.path.join(top, f) for f in files if f.endswith((".pyc", ".pyo"))]
print(json.dumps({
    "installed": sorted({canonicalize_name(d.metadata["Name"]) for d in metadata.distributions()}),
    "needed": needed(sys.argv[1]) if len(sys.argv) > 1 else [],
    "bytecode": bytecode,
    "compilers": sorted(c for c in ("cc", "gcc", "g++", "c++", "clang", "tcc") if shutil.which(c)),
}))
"""


@dataclass(frozen=True)
class Contents:
    installed: frozenset[str]
    needed: frozenset[str]
    bytecode: tuple[str, ...]
    compilers: tuple[str, ...]


def _inspect(engine: Engine, image: str, clock: Clock, *root: str) -> Contents:
    out = engine.run(
        "run", "--rm", "--network=none", "--read-only", *engine.run_options,
        "--entrypoint", "python", image, "-c", _INSPECT, *root,
        clock=clock,
    ).stdout  # fmt: skip
    found = json.loads(out)
    return Contents(
        frozenset(found["installed"]),
        frozenset(found["needed"]),
        tuple(found["bytecode"]),
        tuple(found["compilers"]),
    )


def check_contents(engine: Engine, image: str, base: Base, distribution: str, clock: Clock) -> list[str]:
    """No compiler, no byte code, nothing installed above the base that the plugin does not need."""
    inside = _inspect(engine, image, clock, distribution)
    below = _inspect(engine, base.image, clock)
    added = inside.installed - below.installed
    unneeded = sorted(added - inside.needed)
    problems = []
    if unneeded:
        problems.append(f"installed but not needed by {distribution}: {', '.join(unneeded)}")
    if inside.bytecode:
        problems.append(f"{len(inside.bytecode)} byte-code caches, e.g. {', '.join(inside.bytecode[:3])}")
    if inside.compilers:
        problems.append(f"compilers: {', '.join(inside.compilers)}")
    if problems:
        raise ImageReportError("the image holds what it must not: " + "; ".join(problems))
    return [
        f"  contents: {len(added)} distributions above the base, all needed by {distribution}; "
        "no byte code, no compiler"
    ]
