"""Every exception class of the product derives from exactly one of the roots ARCHITECTURE.md lists."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import ascend_plugin
import backends

ARCHITECTURE = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"
_ROW = re.compile(r"^\| `(\w+)` \| `((?:ascend_plugin|backends)/[\w/]+)\.py` \|", re.MULTILINE)


def listed_roots() -> dict[str, type[BaseException]]:
    """The roots of the Errors table of ARCHITECTURE.md, by name."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Errors") :]
    section = section[: section.index("\n## ", 1)]
    roots = {}
    for name, path in _ROW.findall(section):
        root = getattr(importlib.import_module(path.replace("/", ".")), name)
        assert isinstance(root, type), name
        assert issubclass(root, BaseException), name
        roots[name] = root
    return roots


def product_exceptions() -> list[type[BaseException]]:
    """Every exception class the product's modules define (generated code and __main__ aside)."""
    for package in (ascend_plugin, backends):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not module.name.startswith(("ascend_plugin.kubelet_api", "ascend_plugin.__main__")):
                importlib.import_module(module.name)
    pending, found = [BaseException], set()
    while pending:
        for kind in pending.pop().__subclasses__():
            if kind not in found:
                found.add(kind)
                pending.append(kind)
    return sorted(
        (kind for kind in found if kind.__module__.startswith(("ascend_plugin.", "backends."))),
        key=lambda kind: f"{kind.__module__}.{kind.__qualname__}",
    )


def test_every_exception_class_is_under_one_listed_root() -> None:
    roots = listed_roots()
    for kind in product_exceptions():
        under = [name for name, root in roots.items() if issubclass(kind, root)]
        assert len(under) == 1, (
            f"{kind.__module__}.{kind.__qualname__} is under {under or 'no root ARCHITECTURE.md lists'}: "
            "derive it from the root of its layer (ARCHITECTURE.md, Errors)"
        )


def test_each_listed_root_is_a_root_and_there_are_about_a_dozen() -> None:
    roots = listed_roots()
    product = set(product_exceptions())
    found = {kind.__name__ for kind in product if not any(base in product for base in kind.__bases__)}
    assert found == set(roots)
    assert len(roots) <= 12
