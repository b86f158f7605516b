"""Where the plugin's pods run, and how an upgrade replaces them.

One plugin per NPU node, on every NPU node and no other, surviving taints and
eviction pressure; an upgrade never runs two plugins on a node at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from chart_harness import DEFAULTS, FAMILY_FILES, VALUES_FILES, ChartRenderer, Rendering

ASCEND_TAINTS = ("huawei.com/Ascend310", "huawei.com/Ascend310P", "huawei.com/Ascend910")

ACCELERATOR_LABEL = {
    "310": "huawei-Ascend310",
    "310B": "huawei-Ascend310",
    "310P": "huawei-Ascend310P",
    "910": "huawei-Ascend910",
    "950": "huawei-npu",
}


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_old_pod_goes_before_the_new_one_starts(renderings: dict[str, Rendering], values_file: str) -> None:
    """maxSurge 0: two plugins on a node would fight over the kubelet socket and the resource."""
    strategy = renderings[values_file].daemonset["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def test_rollout_pace_is_a_value_but_surge_is_not(chart: ChartRenderer) -> None:
    strategy = chart.render({"updateStrategy": {"maxUnavailable": "25%"}}).daemonset["spec"]["updateStrategy"]
    assert strategy["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": "25%"}


@pytest.mark.parametrize(
    ("values", "priority_class"),
    [
        pytest.param({}, "system-node-critical", id="default"),
        pytest.param({"priorityClassName": "npu-agents"}, "npu-agents", id="custom"),
        pytest.param({"priorityClassName": ""}, None, id="none"),
    ],
)
def test_priority_class(chart: ChartRenderer, values: dict[str, Any], priority_class: str | None) -> None:
    assert chart.render(values).pod_spec.get("priorityClassName") == priority_class


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_tolerates_the_ascend_taints(renderings: dict[str, Rendering], values_file: str) -> None:
    tolerations = renderings[values_file].pod_spec["tolerations"]
    for taint in ASCEND_TAINTS:
        assert {"key": taint, "operator": "Exists", "effect": "NoSchedule"} in tolerations, taint
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in tolerations


def test_tolerations_are_replaceable(chart: ChartRenderer) -> None:
    custom = [{"key": "dedicated", "operator": "Equal", "value": "npu", "effect": "NoExecute"}]
    assert chart.render({"tolerations": custom}).pod_spec["tolerations"] == custom


@pytest.mark.parametrize(("family", "values_file"), FAMILY_FILES.items())
def test_family_files_select_their_nodes(
    renderings: dict[str, Rendering], family: str, values_file: str
) -> None:
    assert renderings[values_file].pod_spec["nodeSelector"]["accelerator"] == ACCELERATOR_LABEL[family]


def test_310b_stays_on_arm_boards(renderings: dict[str, Rendering]) -> None:
    """310 cards share the 310B label; the boards are aarch64 SoCs."""
    assert renderings[FAMILY_FILES["310B"]].pod_spec["nodeSelector"]["kubernetes.io/arch"] == "arm64"


def test_without_a_family_file_only_npu_nodes(renderings: dict[str, Rendering]) -> None:
    pod_spec = renderings[DEFAULTS].pod_spec
    assert "nodeSelector" not in pod_spec
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "accelerator", "operator": "In", "values": sorted(set(ACCELERATOR_LABEL.values()))}
            ]
        }
    ]


def test_placement_is_a_value(chart: ChartRenderer) -> None:
    """Maps merge in Helm: null, not {}, removes the default affinity."""
    rendering = chart.render({"nodeSelector": {"npu": "yes"}, "affinity": None})
    assert rendering.pod_spec["nodeSelector"] == {"npu": "yes"}
    assert "affinity" not in rendering.pod_spec


@pytest.mark.parametrize(("host_network", "dns_policy"), [(False, None), (True, "ClusterFirstWithHostNet")])
def test_host_network_is_opt_in(chart: ChartRenderer, host_network: bool, dns_policy: str | None) -> None:
    """The pod's own network by default; on the host's, it still resolves cluster names."""
    values = {} if not host_network else {"hostNetwork": True}
    pod_spec = chart.render(values).pod_spec
    assert pod_spec["hostNetwork"] is host_network
    assert pod_spec.get("dnsPolicy") == dns_policy
