"""serve: by-node-label: each node's mode is a node label; one release, one set of cluster-wide objects.

The device plugin's DaemonSet runs on the nodes whose label does not say dra, the
DRA driver's on those whose label does, so a node moves by relabelling it; the
two DaemonSets never select each other's pods, and the release's ClusterRole,
admission policy and DeviceClasses are rendered once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from chart_harness import FAMILY_FILES, ChartRenderer, Rendering

PER_NODE = {"serve": "by-node-label"}
LABEL = "ascend-device-plugin.io/serve"


@pytest.fixture(scope="module")
def per_node(chart: ChartRenderer) -> Rendering:
    return chart.render_file(FAMILY_FILES["910"], PER_NODE)


def daemonsets(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {daemonset["metadata"]["name"]: daemonset for daemonset in rendering.of_kind("DaemonSet")}


def env(daemonset: dict[str, Any]) -> dict[str, str | None]:
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    return {entry["name"]: entry.get("value") for entry in container["env"]}


def runs_on(daemonset: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether the DaemonSet's node selector and required node affinity admit a node with ``labels``."""
    spec = daemonset["spec"]["template"]["spec"]
    if any(labels.get(key) != value for key, value in spec.get("nodeSelector", {}).items()):
        return False
    required = (
        spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required is None:
        return True

    def holds(expression: dict[str, Any]) -> bool:
        value = labels.get(expression["key"])
        if expression["operator"] == "In":
            return value in expression["values"]
        if expression["operator"] == "NotIn":
            return value not in expression["values"]
        raise AssertionError(expression)

    return any(
        all(holds(e) for e in term.get("matchExpressions", ())) for term in required["nodeSelectorTerms"]
    )


def test_one_daemonset_per_mode(per_node: Rendering) -> None:
    found = daemonsets(per_node)
    assert set(found) == {"ascend-device-plugin", "ascend-device-plugin-dra"}
    assert env(found["ascend-device-plugin"])["ASCEND_DP_SERVE"] == "device-plugin"
    assert env(found["ascend-device-plugin-dra"])["ASCEND_DP_SERVE"] == "dra"


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, "device-plugin"),
        ("device-plugin", "device-plugin"),
        ("dra", "dra"),
        ("anything", "device-plugin"),
    ],
)
def test_the_node_label_puts_each_node_under_exactly_one_daemonset(
    per_node: Rendering, value: str | None, mode: str
) -> None:
    labels = {"accelerator": "huawei-Ascend910"} | ({LABEL: value} if value is not None else {})
    serving = [env(ds)["ASCEND_DP_SERVE"] for ds in daemonsets(per_node).values() if runs_on(ds, labels)]
    assert serving == [mode]
    assert not [ds for ds in daemonsets(per_node).values() if runs_on(ds, {LABEL: value or ""})], (
        "the family's own selector still applies"
    )


def test_the_daemonsets_never_select_each_others_pods(per_node: Rendering) -> None:
    found = list(daemonsets(per_node).values())
    for daemonset in found:
        selector = daemonset["spec"]["selector"]["matchLabels"]
        own = daemonset["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= own.items()
        for other in found:
            if other is not daemonset:
                assert not selector.items() <= other["spec"]["template"]["metadata"]["labels"].items()


def test_the_device_plugin_daemonset_keeps_its_selector(per_node: Rendering, chart: ChartRenderer) -> None:
    """A DaemonSet's selector cannot change: moving a release to by-node-label must not touch it."""
    before = chart.render_file(FAMILY_FILES["910"]).daemonset
    after = daemonsets(per_node)["ascend-device-plugin"]
    assert after["spec"]["selector"] == before["spec"]["selector"]


def test_each_mode_mounts_its_own_kubelet_directories(per_node: Rendering) -> None:
    mounts = {
        name: {m["mountPath"] for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
        for name, ds in daemonsets(per_node).items()
    }
    assert "/var/lib/kubelet/device-plugins" in mounts["ascend-device-plugin"]
    assert "/var/lib/kubelet/plugins_registry" not in mounts["ascend-device-plugin"]
    assert {
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins/npu.huawei.com",
        "/var/run/cdi",
    } <= (mounts["ascend-device-plugin-dra"])
    assert "/var/lib/kubelet/device-plugins" not in mounts["ascend-device-plugin-dra"]
    for paths in mounts.values():
        assert "/var/lib/kubelet/pod-resources" in paths, "which chips pods hold, in both modes"


def test_one_set_of_cluster_wide_objects(per_node: Rendering) -> None:
    kinds = Counter(m["kind"] for m in per_node.manifests)
    assert kinds["ClusterRole"] == kinds["ClusterRoleBinding"] == kinds["ValidatingAdmissionPolicy"] == 1
    assert kinds["DeviceClass"] > 0
    names = [m["metadata"]["name"] for m in per_node.of_kind("DeviceClass")]
    assert len(names) == len(set(names))


def test_the_service_account_may_do_what_either_mode_does(per_node: Rendering) -> None:
    assert per_node.allows("delete", "resource.k8s.io", "resourceslices", None)
    assert per_node.allows("get", "resource.k8s.io", "resourceclaims", None)
    assert per_node.allows("get", "", "pods", "training", "resnet-0")
    assert per_node.allows("patch", "", "nodes", None)


def test_the_metrics_service_selects_both_modes_pods(chart: ChartRenderer) -> None:
    rendering = chart.render({**PER_NODE, "serviceMonitor": {"enabled": True}})
    selector = rendering.one("Service")["spec"]["selector"]
    for daemonset in daemonsets(rendering).values():
        assert selector.items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()


def test_a_custom_affinity_gets_the_mode_in_every_term(chart: ChartRenderer) -> None:
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
    ]
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    rendering = chart.render({**PER_NODE, "affinity": affinity})
    for daemonset in daemonsets(rendering).values():
        for zone in ("a", "b"):
            mode = env(daemonset)["ASCEND_DP_SERVE"]
            on_dra_node = runs_on(daemonset, {"zone": zone, LABEL: "dra"})
            assert on_dra_node == (mode == "dra")


def test_no_affinity_at_all_still_splits_the_nodes(chart: ChartRenderer) -> None:
    rendering = chart.render({**PER_NODE, "affinity": None})
    for daemonset in daemonsets(rendering).values():
        assert runs_on(daemonset, {LABEL: "dra"}) == (env(daemonset)["ASCEND_DP_SERVE"] == "dra")
