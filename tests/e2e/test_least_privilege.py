"""The chart's RBAC and its admission policy on the real API server: a node's plugin writes its own node's
objects and nothing else.

RBAC cannot say "this node's": the chart's ValidatingAdmissionPolicy reads the node from the plugin's
ServiceAccount token (a DaemonSet pod's token names the pod's node), and refuses a write to another
node's device-info ConfigMap, ResourceSlices, Node or pods. Two nodes exist (no kubelet is needed: the
objects are what is judged); the plugin's identity is a token bound to a pod on node-a.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api import Api, ApiError
from chart_harness import ChartRenderer, Rendering
from cluster import Cluster
from node_plugin import NAMESPACE, applied_objects, wait_for

DRIVER = "npu.huawei.com"  # the chart's default driver name

NODES = ("node-a", "node-b")
RELEASE_CONFIG = "ascend-device-plugin-config"


@pytest.fixture(scope="module")
def rendering(chart: ChartRenderer) -> Rendering:
    return chart.render_file("values-910.yaml", {"serve": "by-node-label", "settings": {"volcano": True}})


@pytest.fixture(scope="module")
def admin(control_plane: Cluster, rendering: Rendering) -> Api:
    api = control_plane.admin()
    api.apply_all(applied_objects(rendering), NAMESPACE)
    for node in NODES:
        api.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"work-on-{node}", "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "w", "image": "e2e.local/busybox:1"}]},
            }
        )
    return api


@pytest.fixture(scope="module", autouse=True)
def policy_in_force(admin: Api, rendering: Rendering) -> None:
    """The API server enforces a new ValidatingAdmissionPolicy once its informer has it (about a second)."""
    unbound = admin.as_user(token(admin, rendering, None))

    def refused() -> bool:
        try:
            unbound.create(device_info("probe"))
        except ApiError as error:
            return error.status == 403 and "bound to a pod" in error.message
        admin.delete("v1", "ConfigMap", "mindx-dl-deviceinfo-probe", NAMESPACE)
        return False

    wait_for(refused, "the admission policy in force")


def token(admin: Api, rendering: Rendering, bound_to_node: str | None) -> str:
    """A token of the chart's ServiceAccount: bound to a pod on ``bound_to_node``, or to nothing."""
    (account,) = {
        daemonset["spec"]["template"]["spec"]["serviceAccountName"]
        for daemonset in rendering.of_kind("DaemonSet")
    }
    spec: dict[str, Any] = {"audiences": [], "expirationSeconds": 3600}
    if bound_to_node is not None:
        name = f"plugin-on-{bound_to_node}"
        if admin.read("v1", "Pod", name, NAMESPACE) is None:
            admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {
                        "nodeName": bound_to_node,
                        "serviceAccountName": account,
                        "containers": [{"name": "plugin", "image": "e2e.local/busybox:1"}],
                    },
                }
            )
        pod = admin.read("v1", "Pod", name, NAMESPACE)
        assert pod is not None
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "uid": pod["metadata"]["uid"],
        }
    answer = admin.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    found: str = answer["status"]["token"]
    return found


def device_info(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"mindx-dl-deviceinfo-{node}", "namespace": NAMESPACE},
        "data": {"DeviceInfoCfg": "{}"},
    }


def resource_slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{DRIVER}-{node}-e2e"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "npu-0"}],
        },
    }


def writes(as_plugin: Api, node: str) -> dict[str, Callable[[], object]]:
    """Each write a plugin makes for ``node``'s objects, as it makes them (create or update, merge patch)."""
    label = {"metadata": {"labels": {"accelerator": "huawei-Ascend910"}}}
    annotation = {"metadata": {"annotations": {"huawei.com/AscendReal": "Ascend910-0"}}}
    merge = "application/merge-patch+json"
    return {
        "device-info ConfigMap": lambda: as_plugin.replace(device_info(node)),
        "ResourceSlice": lambda: as_plugin.replace(resource_slice(node)),
        "node labels": lambda: as_plugin.request("PATCH", f"/api/v1/nodes/{node}", label, content_type=merge),
        "pod annotations": lambda: as_plugin.request(
            "PATCH", f"/api/v1/namespaces/default/pods/work-on-{node}", annotation, content_type=merge
        ),
    }


def refusal(write: Callable[[], object], what: str = "") -> ApiError:
    try:
        write()
    except ApiError as refused:
        return refused
    raise AssertionError(f"{what}: the write was not refused")


@pytest.fixture(scope="module")
def as_node_a(admin: Api, rendering: Rendering) -> Api:
    return admin.as_user(token(admin, rendering, "node-a"))


def test_the_plugin_writes_its_own_node_s_objects(as_node_a: Api) -> None:
    for write in writes(as_node_a, "node-a").values():
        write()
    as_node_a.delete("resource.k8s.io/v1", "ResourceSlice", f"{DRIVER}-node-a-e2e")


def test_another_node_s_objects_are_refused_with_the_reason(admin: Api, as_node_a: Api) -> None:
    admin.apply(device_info("node-b"))  # an admin's object of node-b: not the plugin's to update either
    for what, write in writes(as_node_a, "node-b").items():
        refused = refusal(write, what)
        assert refused.status == 403, (what, refused)
        assert "the plugin on node node-a" in refused.message, (what, refused.message)
    refused = refusal(lambda: as_node_a.delete("v1", "ConfigMap", "mindx-dl-deviceinfo-node-b", NAMESPACE))
    assert refused.status == 403


def test_a_token_bound_to_no_pod_writes_nothing(admin: Api, rendering: Rendering) -> None:
    unbound = admin.as_user(token(admin, rendering, None))
    for what, write in writes(unbound, "node-a").items():
        refused = refusal(write, what)
        assert refused.status == 403, what
        assert "writes only with a ServiceAccount token bound to a pod on a node" in refused.message, what


def test_an_administrator_is_not_held_by_the_policy(admin: Api) -> None:
    admin.apply(device_info("node-b"))
    assert admin.read("v1", "ConfigMap", "mindx-dl-deviceinfo-node-b", NAMESPACE) is not None


def can(api: Api, verb: str, resource: str, name: str = "") -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {"namespace": NAMESPACE, "verb": verb, "resource": resource, "name": name}
        },
    }
    answer = api.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    return bool(answer["status"]["allowed"])


def test_configmap_rights_are_by_name(as_node_a: Api) -> None:
    assert not can(as_node_a, "patch", "configmaps")
    assert can(as_node_a, "get", "configmaps", RELEASE_CONFIG)
    assert not can(as_node_a, "get", "secrets")
    wait_for(
        lambda: can(as_node_a, "get", "configmaps", "mindx-dl-fault-config"), "the fault config readable"
    )
