"""The fault path's words name one thing each: one class named ``Observation``, one named ``Verdict``."""

from __future__ import annotations

import ast
from pathlib import Path

from ascend_plugin.fault_policy.faults import Observation
from ascend_plugin.inventory.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ("ascend_plugin/kubelet_api/", "backends/dcmi/_dcmi_cffi.py")


def _classes_named(name: str) -> list[str]:
    """Every product module defining a class called ``name``, as a dotted path."""
    found = []
    for package in ("ascend_plugin", "backends"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(GENERATED):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(isinstance(node, ast.ClassDef) and node.name == name for node in ast.walk(tree)):
                found.append(relative.removesuffix(".py").replace("/", "."))
    return found


def test_one_class_is_called_observation_what_the_fault_policy_is_told() -> None:
    assert _classes_named("Observation") == [Observation.__module__]


def test_one_class_is_called_verdict_the_health_verdict_on_a_chip() -> None:
    assert _classes_named("Verdict") == [Verdict.__module__]
