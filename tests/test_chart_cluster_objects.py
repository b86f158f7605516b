"""Cluster-wide objects once: a release per family installs side by side with the others.

Helm refuses to install an object another release owns, so two releases that
render a cluster-scoped object of the same kind and name cannot both be
installed. Every family file is rendered as its own release with the DRA driver
on, and no cluster-scoped object may repeat across them; each release installs
only its own family's DeviceClasses.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import yaml
from chart_harness import CHART_DIR, FAMILY_FILES, ChartRenderer, Rendering

DRA = {"serve": "dra"}
CLUSTER_SCOPED = frozenset(
    {
        "ClusterRole",
        "ClusterRoleBinding",
        "DeviceClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "PriorityClass",
        "Namespace",
        "CustomResourceDefinition",
    }
)
# The family each of the chart's DeviceClass entries selects (the entry name, before ".<driver>").
DRIVER = "npu.huawei.com"


def cluster_objects(rendering: Rendering) -> list[tuple[str, str]]:
    return [
        (manifest["kind"], manifest["metadata"]["name"])
        for manifest in rendering.manifests
        if manifest["kind"] in CLUSTER_SCOPED or "namespace" not in manifest["metadata"]
    ]


def releases(
    chart: ChartRenderer, families: list[str], extra: dict[str, dict[str, Any]]
) -> dict[str, Rendering]:
    """One release per family, named after it (ascend-910, ...), with the DRA driver."""
    return {
        family: chart.render_file(
            FAMILY_FILES[family], {**DRA, **extra.get(family, {})}, release=f"ascend-{family.lower()}"
        )
        for family in families
    }


def repeated(renderings: dict[str, Rendering]) -> list[tuple[str, str]]:
    counts = Counter(item for rendering in renderings.values() for item in set(cluster_objects(rendering)))
    return sorted(item for item, count in counts.items() if count > 1)


def class_families(rendering: Rendering) -> set[str]:
    """The families the release's DeviceClasses select (read from their CEL selectors)."""
    found = set()
    for device_class in rendering.of_kind("DeviceClass"):
        expression = device_class["spec"]["selectors"][0]["cel"]["expression"]
        for family in FAMILY_FILES:
            if f'"{family}"' in expression:
                found.add(family)
    return found


def test_every_object_a_release_renders_without_a_namespace_is_known_to_be_cluster_wide(
    chart: ChartRenderer,
) -> None:
    """The check below would miss a cluster-scoped kind it does not know: every unnamespaced one is here."""
    rendering = chart.render({"serve": "by-node-label"})
    unnamespaced = {m["kind"] for m in rendering.manifests if "namespace" not in m["metadata"]}
    assert unnamespaced <= CLUSTER_SCOPED


@pytest.mark.parametrize(
    "families",
    [
        ["910", "310P"],
        ["910", "310B"],
        ["310P", "310B"],
        ["910", "310P", "310B"],
        ["310", "910"],
        ["310", "310P"],
    ],
    ids="+".join,
)
def test_releases_of_different_families_share_no_cluster_wide_object(
    chart: ChartRenderer, families: list[str]
) -> None:
    assert repeated(releases(chart, families, {})) == []


def test_310_cards_and_310b_boards_share_ascend310_through_one_release(chart: ChartRenderer) -> None:
    """ascend310 (huawei.com/Ascend310) selects both families: one of the two releases keeps it."""
    clash = releases(chart, ["310", "310B"], {})
    assert repeated(clash) == [("DeviceClass", f"ascend310.{DRIVER}")]
    side_by_side = releases(chart, ["310", "310B"], {"310B": {"dra": {"skipClasses": ["ascend310"]}}})
    assert repeated(side_by_side) == []
    installed = {
        name for r in side_by_side.values() for _, name in cluster_objects(r) if name.endswith(DRIVER)
    }
    assert {f"ascend310.{DRIVER}", f"ascend310b.{DRIVER}", f"ascend310-share.{DRIVER}"} <= installed


@pytest.mark.parametrize("family", ["310", "310B", "310P", "910", "950"])
def test_a_family_release_installs_only_its_own_device_classes(chart: ChartRenderer, family: str) -> None:
    (rendering,) = releases(chart, [family], {}).values()
    assert rendering.of_kind("DeviceClass")
    selected = class_families(rendering)
    assert family in selected
    # ascend310 is the one class that also selects a second family (310 and 310B: huawei.com/Ascend310).
    assert selected - {family} <= ({"310", "310B"} - {family} if family in ("310", "310B") else set())


def every_class() -> int:
    """The DeviceClasses the chart's defaults define: per family, per vNPU template, per shared family."""
    dra = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))["dra"]
    templates = sum(len(entry["templates"]) for entry in dra["partitionClasses"])
    return len(dra["deviceClasses"]) + templates + len(dra["shareClasses"])


def test_without_a_family_one_release_installs_every_class(chart: ChartRenderer) -> None:
    assert class_families(chart.render(DRA)) == {"310", "310B", "310P", "910", "950"}
    assert len(chart.render(DRA).of_kind("DeviceClass")) == every_class() == 27


@pytest.mark.parametrize(("install", "count"), [("all", 27), ("none", 0)])
def test_installing_every_class_or_none_is_a_switch(chart: ChartRenderer, install: str, count: int) -> None:
    rendering = chart.render_file(FAMILY_FILES["310B"], {**DRA, "dra": {"installClasses": install}})
    assert len(rendering.of_kind("DeviceClass")) == count


def test_the_cluster_wide_objects_of_a_release_are_its_own(chart: ChartRenderer) -> None:
    """Roles, bindings and the admission policy carry the release's name: two releases never share one."""
    rendering = chart.render_file(FAMILY_FILES["910"], DRA, release="ascend-910")
    names = {name for kind, name in cluster_objects(rendering) if kind != "DeviceClass"}
    assert names
    assert all(name.startswith("ascend-910-") for name in names)
