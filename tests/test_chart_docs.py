"""docs/deployment.md keeps up with the chart: every value documented, every board failure mapped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from chart_harness import CHART_DIR, ROOT

DOC = ROOT / "docs" / "deployment.md"

# Values whose content is free-form (maps, Kubernetes objects): documented as a whole.
DOCUMENTED_WHOLE = frozenset(
    {
        "nodeSelector",
        "affinity",
        "podAnnotations",
        "podLabels",
        "resources",
        "probes.liveness",
        "probes.readiness",
        "serviceAccount.annotations",
        "serviceMonitor.labels",
        "runtimeConfig.faultLevels",
    }
)

# What a failed board deployment shows, as an operator would search for it.
SEED_SYMPTOMS = (
    "invalid ai core num 1.000000",
    "MountVolume",
    "dm_send_msg fail:2",
    "SIGBUS",
    'cannot get resource "nodes"',
    'cannot update resource "configmaps"',
    "host ip is invalid",
    "time out",
)


def value_paths(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in DOCUMENTED_WHOLE:
            yield from value_paths(value, f"{path}.")
        else:
            yield path


def troubleshooting_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


@pytest.mark.parametrize(
    "path", list(value_paths(yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))))
)
def test_every_value_is_in_the_reference(path: str) -> None:
    assert f"| `{path}` |" in DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("symptom", SEED_SYMPTOMS)
def test_every_reported_symptom_has_a_cause_and_a_fix(symptom: str) -> None:
    rows = [row for row in troubleshooting_rows() if symptom in row.split(" | ")[0]]
    assert len(rows) == 1, f"{symptom!r}: {len(rows)} rows"
    cells = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    assert len(cells) == 3
    assert all(cells), rows[0]
