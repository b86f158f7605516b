"""The chart's grant for removing a 950 node's leftover ``huawei.com/Ascend910``: ``patch`` on
``nodes/status`` in a release of family 950 only (rbac.removeStaleResources), and the admission policy
holding it to removing that resource from the plugin's own node, nothing else of the status.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_policy import Request, admit
from chart_harness import DEFAULTS, NAMESPACE, VALUES_FILES, ChartRenderer, Rendering

ACCOUNT = f"system:serviceaccount:{NAMESPACE}:ascend-device-plugin"
NODE = "npu-node-1"
OTHER = "npu-node-2"
TOKEN = {"authentication.kubernetes.io/node-name": [NODE], "authentication.kubernetes.io/pod-name": ["p"]}
STALE = "huawei.com/Ascend910"
STATUS_PATCH = ("patch", "", "nodes/status", None, None)


def _node(name: str, capacity: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}]
    return {
        "metadata": {"name": name},
        "status": {"capacity": capacity, "allocatable": allocatable, "conditions": conditions},
    }


def _status_write(old: dict[str, Any], new: dict[str, Any], extra: Any = None) -> Request:
    token = TOKEN if extra is None else extra
    return Request(ACCOUNT, "UPDATE", "", "nodes", new, old, token, sub_resource="status")


LEFT = _node(NODE, {STALE: "8", "huawei.com/npu": "8", "cpu": "96"}, {STALE: "0", "huawei.com/npu": "8"})


def _without(node: dict[str, Any], *parts: str) -> dict[str, Any]:
    changed = copy.deepcopy(node)
    for part in parts:
        del changed["status"][part][STALE]
    return changed


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_only_a_950_release_may_patch_the_node_status(
    renderings: dict[str, Rendering], values_file: str
) -> None:
    rendering = renderings[values_file]
    assert rendering.allows(*STATUS_PATCH) is (values_file == "values-950.yaml")
    assert not rendering.allows("update", "", "nodes/status", None, None)


def test_the_grant_can_be_turned_off(chart: ChartRenderer) -> None:
    rendering = chart.render_file("values-950.yaml", {"rbac": {"removeStaleResources": False}})
    assert not rendering.allows(*STATUS_PATCH)
    rules = rendering.one("ValidatingAdmissionPolicy")["spec"]["matchConstraints"]["resourceRules"]
    assert not [rule for rule in rules if "nodes/status" in rule["resources"]]


def test_a_release_of_any_family_grants_no_status(renderings: dict[str, Rendering]) -> None:
    """family "": mostly 910 nodes, where the grant would serve nothing; its 950 nodes log the command."""
    assert not renderings[DEFAULTS].allows(*STATUS_PATCH)


@pytest.fixture(scope="module")
def policy(chart: ChartRenderer) -> dict[str, Any]:
    return chart.render_file("values-950.yaml").one("ValidatingAdmissionPolicy")


@pytest.mark.parametrize(
    "parts", [("capacity", "allocatable"), ("capacity",), ("allocatable",)], ids="+".join
)
def test_the_plugin_removes_the_leftover_from_its_own_node(
    policy: dict[str, Any], parts: tuple[str, ...]
) -> None:
    assert admit(policy, _status_write(LEFT, _without(LEFT, *parts))) is None


def _changed(**status: Any) -> dict[str, Any]:
    node = _without(LEFT, "capacity", "allocatable")
    node["status"].update(status)
    return node


REFUSED = {
    "its own resource removed": _changed(capacity={STALE: "8", "cpu": "96"}),
    "a capacity changed": _changed(capacity={"huawei.com/npu": "16", "cpu": "96"}),
    "a resource added": _changed(allocatable={"huawei.com/npu": "8", "example.com/x": "1"}),
    "a condition changed": _changed(conditions=[{"type": "Ready", "status": "False"}]),
    "a field added": _changed(phase="Running"),
}


@pytest.mark.parametrize("what", REFUSED)
def test_nothing_else_of_the_status_changes(policy: dict[str, Any], what: str) -> None:
    refused = admit(policy, _status_write(LEFT, REFUSED[what]))
    assert refused == (
        f"the plugin on node {NODE} changes nothing in the status of its Node but remove {STALE}"
    ), what


def test_not_on_another_node(policy: dict[str, Any]) -> None:
    other = _node(OTHER, {STALE: "8"}, {STALE: "8"})
    refused = admit(policy, _status_write(other, _without(other, "capacity", "allocatable")))
    assert refused == f"the plugin on node {NODE} changes only its own Node, not {OTHER}"


def test_the_labels_are_judged_as_before(policy: dict[str, Any]) -> None:
    """The main resource's writes (labels) are no status writes: the status rule lets them be."""
    labelled = copy.deepcopy(LEFT)
    labelled["metadata"]["labels"] = {"accelerator": "huawei-npu"}
    assert admit(policy, Request(ACCOUNT, "UPDATE", "", "nodes", labelled, LEFT, TOKEN)) is None
