"""Each node's plugin writes only its own node's objects: the chart's ValidatingAdmissionPolicy.

RBAC grants the plugin's ServiceAccount its verbs cluster-wide (ResourceSlices,
Nodes, pods) or namespace-wide (the device-info ConfigMap, named per node); the
policy narrows every write to the node named in the requester's token, as
Kubernetes' example DRA driver does. Its CEL is applied here to the requests one
node's plugin makes (tests/admission_policy.py); the end-to-end suite applies it
on a real API server.
"""

from __future__ import annotations

from typing import Any

import pytest
from admission_policy import Request, admit
from chart_harness import NAMESPACE, ChartRenderer, Rendering

ACCOUNT = f"system:serviceaccount:{NAMESPACE}:ascend-device-plugin"
NODE = "npu-node-1"
OTHER = "npu-node-2"
TOKEN_OF_NODE_1 = {
    "authentication.kubernetes.io/node-name": [NODE],
    "authentication.kubernetes.io/pod-name": ["p"],
}


@pytest.fixture(scope="module")
def both_modes(chart: ChartRenderer) -> Rendering:
    return chart.render({"serve": "by-node-label", "settings": {"volcano": True}})


def policy(rendering: Rendering) -> dict[str, Any]:
    return rendering.one("ValidatingAdmissionPolicy")


def configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system"}, "data": {}}


def resource_slice(node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"npu.huawei.com-{node}-x7k2p"},
        "spec": {"driver": "npu.huawei.com", "nodeName": node},
    }


def named(name: str, **spec: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def write(operation: str, group: str, resource: str, obj: dict[str, Any], extra: Any = None) -> Request:
    old = obj if operation in ("UPDATE", "DELETE") else None
    new = obj if operation != "DELETE" else None
    return Request(ACCOUNT, operation, group, resource, new, old, TOKEN_OF_NODE_1 if extra is None else extra)


# What node 1's plugin writes: each allowed.
OWN = [
    write("CREATE", "", "configmaps", configmap(f"mindx-dl-deviceinfo-{NODE}")),
    write("UPDATE", "", "configmaps", configmap(f"mindx-dl-deviceinfo-{NODE}")),
    write("CREATE", "resource.k8s.io", "resourceslices", resource_slice(NODE)),
    write("UPDATE", "resource.k8s.io", "resourceslices", resource_slice(NODE)),
    write("DELETE", "resource.k8s.io", "resourceslices", resource_slice(NODE)),
    write("UPDATE", "", "nodes", named(NODE)),
    write("UPDATE", "", "pods", named("job-0", nodeName=NODE)),
]

# The same requests on node 2's objects, and other objects: each refused, with the reason.
OTHERS = [
    (write("UPDATE", "", "configmaps", configmap(f"mindx-dl-deviceinfo-{OTHER}")), "writes only ConfigMap"),
    (
        write("CREATE", "", "configmaps", configmap("coredns")),
        "writes only ConfigMap mindx-dl-deviceinfo-npu-node-1",
    ),
    (
        write("CREATE", "resource.k8s.io", "resourceslices", resource_slice(OTHER)),
        "its own node's ResourceSlices",
    ),
    (
        write("UPDATE", "resource.k8s.io", "resourceslices", resource_slice(OTHER)),
        "its own node's ResourceSlices",
    ),
    (
        write("DELETE", "resource.k8s.io", "resourceslices", resource_slice(OTHER)),
        "its own node's ResourceSlices",
    ),
    (write("UPDATE", "", "nodes", named(OTHER)), "changes only its own Node, not npu-node-2"),
    (write("UPDATE", "", "pods", named("job-1", nodeName=OTHER)), "only the pods of its node"),
    (write("UPDATE", "", "pods", named("pending-job")), "only the pods of its node"),
]


@pytest.mark.parametrize("request_", OWN, ids=lambda r: f"{r.operation} {r.resource}")
def test_a_nodes_plugin_writes_its_own_nodes_objects(both_modes: Rendering, request_: Request) -> None:
    assert admit(policy(both_modes), request_) is None


@pytest.mark.parametrize(("request_", "reason"), OTHERS, ids=lambda r: getattr(r, "resource", str(r)))
def test_the_same_token_is_refused_on_another_nodes_objects(
    both_modes: Rendering, request_: Request, reason: str
) -> None:
    refused = admit(policy(both_modes), request_)
    assert refused is not None
    assert reason in refused
    assert refused.startswith("the plugin on node npu-node-1 ")


def test_a_token_bound_to_no_node_writes_nothing(both_modes: Rendering) -> None:
    """A token of the ServiceAccount not issued for a pod on a node (kubectl create token) is refused."""
    request_ = write("UPDATE", "", "configmaps", configmap(f"mindx-dl-deviceinfo-{NODE}"), extra={})
    refused = admit(policy(both_modes), request_)
    assert refused == (
        "ascend-device-plugin writes only with a ServiceAccount token bound to a pod on a node "
        "(authentication.kubernetes.io/node-name): this request has none"
    )


def test_nobody_else_is_held_by_it(both_modes: Rendering) -> None:
    """An administrator, the kubelet, another controller: the policy does not apply to them."""
    for username in ("kubernetes-admin", f"system:node:{NODE}", "system:serviceaccount:kube-system:other"):
        request_ = Request(username, "UPDATE", "", "configmaps", configmap("coredns"), configmap("coredns"))
        assert admit(policy(both_modes), request_) is None


def test_the_policy_is_bound_to_deny(both_modes: Rendering) -> None:
    binding = both_modes.one("ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {
        "policyName": policy(both_modes)["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy(both_modes)["spec"]["failurePolicy"] == "Fail"


def test_it_follows_the_device_info_prefix_and_the_service_account(chart: ChartRenderer) -> None:
    rendering = chart.render(
        {"settings": {"deviceInfoNamePrefix": "npu-info-"}, "serviceAccount": {"name": "npu-agent"}},
        namespace="npu-system",
    )
    account = "system:serviceaccount:npu-system:npu-agent"
    own = Request(
        account,
        "UPDATE",
        "",
        "configmaps",
        configmap(f"npu-info-{NODE}"),
        configmap(f"npu-info-{NODE}"),
        TOKEN_OF_NODE_1,
    )
    assert admit(policy(rendering), own) is None
    other = Request(
        account,
        "UPDATE",
        "",
        "configmaps",
        configmap(f"npu-info-{OTHER}"),
        configmap(f"npu-info-{OTHER}"),
        TOKEN_OF_NODE_1,
    )
    assert admit(policy(rendering), other) is not None


@pytest.mark.parametrize(
    ("values", "kube_version"),
    [({}, "1.29"), ({"rbac": {"ownNodeOnly": False}}, "1.34"), ({"rbac": {"create": False}}, "1.34")],
    ids=["before 1.30", "turned off", "no RBAC"],
)
def test_not_installed_where_it_cannot_work_or_is_not_wanted(
    chart: ChartRenderer, values: dict[str, Any], kube_version: str
) -> None:
    if values.get("rbac", {}).get("create") is False:
        values = {**values, "serviceAccount": {"create": False, "name": "npu-agent"}}
    rendering = chart.render(values, kube_version=kube_version)
    assert not rendering.of_kind("ValidatingAdmissionPolicy")
    assert not rendering.of_kind("ValidatingAdmissionPolicyBinding")


def test_installed_from_1_30(chart: ChartRenderer) -> None:
    assert chart.render({}, kube_version="1.30").of_kind("ValidatingAdmissionPolicy")
