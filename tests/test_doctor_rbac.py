"""doctor, RBAC: SelfSubjectAccessReviews per verb the enabled features need.

The reviews go through the real kubernetes-asyncio client to the loopback API
server of tests/kube_apiserver.py, whose denials stand in for missing rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DoctorRoot
from fake_apiserver import REVIEWS, FakeApiServer

from ascend_plugin.doctor.findings import Guide, Status
from ascend_plugin.doctor.rbac import needed_permissions
from ascend_plugin.settings import Settings

pytestmark = pytest.mark.anyio


def _verbs(settings: Settings) -> dict[str, tuple[str, ...]]:
    return {permission.name: permission.verbs for permission in needed_permissions(settings)}


def test_the_permissions_follow_the_enabled_features() -> None:
    base = {"backend": "fake", "fake_scenario": Path("/s"), "pod_namespace": "ascend"}
    assert _verbs(Settings(**base)) == {
        "rbac:nodes": ("get", "list", "watch", "patch"),
        "rbac:events/default": ("create",),
        "rbac:configmaps/kube-system": ("get", "list", "watch", "create", "update"),
    }
    assert _verbs(Settings(**base, config_configmap="adp-config", node_events=False)) == {
        "rbac:nodes": ("list", "watch", "patch"),
        "rbac:configmaps/kube-system": ("get", "list", "watch", "create", "update"),
        "rbac:configmaps/ascend": ("list", "watch"),
    }
    # Huawei's fault configuration ConfigMap is read in kube-system, wherever the device-info one is.
    elsewhere = Settings(**base, device_info_namespace="volcano-system")
    assert _verbs(elsewhere)["rbac:configmaps/kube-system"] == ("get", "list", "watch")
    assert _verbs(elsewhere)["rbac:configmaps/volcano-system"] == ("get", "list", "watch", "create", "update")
    # One namespace for both ConfigMaps: one finding with every verb.
    shared = Settings(**base, config_configmap="adp-config", config_configmap_namespace="kube-system")
    assert _verbs(shared)["rbac:configmaps/kube-system"] == ("get", "list", "watch", "create", "update")
    quiet = {"node_labels": False, "node_events": False, "device_info_configmap": False}
    assert _verbs(Settings(**base, **quiet, fault_config_configmap=False)) == {}


async def test_a_fully_granted_service_account_passes(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    found = await doctor_py_root.run(kubeconfig=kubeconfig)
    assert found["rbac:nodes"].detail == "allowed: get, list, watch, patch nodes cluster-wide"
    assert found["rbac:events/default"].status is Status.OK
    assert found["rbac:configmaps/kube-system"].detail == (
        "allowed: get, list, watch, create, update configmaps in namespace kube-system"
    )
    # One review per verb and object: nodes 4, events 1, the pods Volcano may have chosen for 1, and in
    # kube-system the device-info ConfigMap 5 and mindx-dl-fault-config 3, each asked by its name.
    reviews = apiserver.requests_of("create", REVIEWS, 201)
    assert len(reviews) == 14
    asked = [review.body["spec"]["resourceAttributes"] for review in reviews]
    named = {(each["verb"], each.get("name")) for each in asked if each["resource"] == "configmaps"}
    assert named == {
        *((verb, "mindx-dl-deviceinfo-node-1") for verb in ("get", "list", "watch", "update")),
        ("create", None),
        *((verb, "mindx-dl-fault-config") for verb in ("get", "list", "watch")),
    }
    assert found["rbac:pods"].detail == "allowed: get pods cluster-wide"


async def test_a_missing_nodes_rule_is_named(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.deny("get", "nodes")
    apiserver.deny("patch", "nodes")
    found = await doctor_py_root.run(kubeconfig=kubeconfig)
    nodes = found["rbac:nodes"]
    assert (nodes.status, nodes.see) == (Status.PROBLEM, Guide.RBAC)
    assert nodes.detail.startswith(
        "denied: get, patch nodes cluster-wide, which node_labels, node_events need(s)"
    )
    assert 'cannot get resource "nodes"' in nodes.detail
    assert nodes.fix is not None
    rule = '{apiGroups: [""], resources: ["nodes"], verbs: ["get", "patch"]}'
    assert nodes.fix.startswith(f"add the rule {rule} to the plugin's ClusterRole")
    assert "kubectl auth can-i get nodes --as=system:serviceaccount:" in nodes.fix
    assert found["rbac:configmaps/kube-system"].status is Status.OK


async def test_a_missing_configmaps_verb_is_named_with_its_namespace(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.deny("update", "configmaps", "kube-system")
    apiserver.deny("watch", "configmaps", "ascend")
    found = await doctor_py_root.run(
        kubeconfig=kubeconfig, config_configmap="adp-config", pod_namespace="ascend"
    )
    device_info = found["rbac:configmaps/kube-system"]
    assert (device_info.status, device_info.see) == (Status.PROBLEM, Guide.RBAC)
    assert 'cannot update resource "configmaps"' in device_info.detail
    assert device_info.fix is not None
    assert '{apiGroups: [""], resources: ["configmaps"], verbs: ["update"]}' in device_info.fix
    assert "Role in namespace kube-system" in device_info.fix
    assert "kubectl auth can-i update configmaps -n kube-system" in device_info.fix
    config = found["rbac:configmaps/ascend"]
    assert (config.status, config.see) == (Status.PROBLEM, Guide.RBAC)
    assert config.detail.startswith("denied: watch configmaps in namespace ascend, which config_configmap")
    assert found["rbac:nodes"].status is Status.OK


async def test_a_denial_is_the_real_servers_403_too(apiserver: FakeApiServer, kubeconfig: Path) -> None:
    from ascend_plugin.kubeapi.client import CONFIGMAPS, connect
    from ascend_plugin.kubeapi.errors import Forbidden

    apiserver.deny("get", "configmaps", "kube-system")
    kube = await connect(kubeconfig)
    try:
        with pytest.raises(
            Forbidden, match='cannot get resource "configmaps" in API group "" in the namespace'
        ):
            await kube.get(CONFIGMAPS, "mindx-dl-deviceinfo-node-1", "kube-system")
    finally:
        await kube.close()


async def test_without_credentials_the_check_is_skipped_with_a_note(doctor_py_root: DoctorRoot) -> None:
    rbac = (await doctor_py_root.run({}, kubeconfig=None))["rbac"]
    assert rbac.status is Status.SKIPPED
    assert rbac.detail.startswith("no cluster credentials: not in a pod, and no kubeconfig given")


async def test_features_all_off_need_no_permission(doctor_py_root: DoctorRoot, kubeconfig: Path) -> None:
    rbac = (
        await doctor_py_root.run(
            kubeconfig=kubeconfig,
            node_labels=False,
            node_events=False,
            device_info_configmap=False,
            fault_config_configmap=False,
        )
    )["rbac"]
    assert (rbac.status, rbac.detail) == (Status.SKIPPED, "every Kubernetes feature is off in the settings")


async def test_a_broken_kubeconfig_is_a_problem(doctor_py_root: DoctorRoot, short_tmp: Path) -> None:
    broken = short_tmp / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: 7\n", encoding="utf-8")
    rbac = (await doctor_py_root.run(kubeconfig=broken))["rbac"]
    assert rbac.status is Status.PROBLEM
    assert rbac.detail.startswith(f"cannot load the kubeconfig {broken}")


async def test_in_a_pod_without_a_token_the_check_is_a_problem(
    doctor_py_root: DoctorRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client reads the service's address from the real environment: make sure it has none.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    rbac = (await doctor_py_root.run({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, kubeconfig=None))["rbac"]
    assert rbac.status is Status.PROBLEM
    assert rbac.fix is not None
    assert "automountServiceAccountToken" in rbac.fix


async def test_an_unreachable_api_server_is_a_problem(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    await apiserver.stop()
    rbac = (await doctor_py_root.run(kubeconfig=kubeconfig))["rbac"]
    assert rbac.status is Status.PROBLEM
    assert rbac.detail.startswith(f"cannot reach the API server at {apiserver.url}")


async def test_a_refused_review_is_a_problem(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.inject(500, "create", REVIEWS)
    rbac = (await doctor_py_root.run(kubeconfig=kubeconfig))["rbac"]
    assert rbac.status is Status.PROBLEM
    assert rbac.detail.startswith("the API server refused a SelfSubjectAccessReview (HTTP 500)")


def test_volcano_mode_needs_pods_and_the_node() -> None:
    base = {"backend": "fake", "fake_scenario": Path("/s"), "node_name": "n1", "kubeconfig": Path("/k")}
    quiet = {
        "node_labels": False,
        "node_events": False,
        "device_info_configmap": False,
        "fault_config_configmap": False,
    }
    assert _verbs(Settings(**base, **quiet, volcano=True)) == {
        "rbac:pods": ("get", "list", "watch", "patch"),
        "rbac:nodes": ("get",),
    }


async def test_doctor_names_a_missing_pods_rule_in_volcano_mode(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.deny("patch", "pods")
    found = await doctor_py_root.run(kubeconfig=kubeconfig, volcano=True)
    assert found["rbac:pods"].status is not Status.OK
    assert "patch" in found["rbac:pods"].detail


def test_a_dra_driver_needs_its_slices_and_claims_too() -> None:
    base = {"backend": "fake", "fake_scenario": Path("/s"), "node_name": "node-1"}
    verbs = _verbs(
        Settings(
            **base,
            serve="dra",
            node_labels=False,
            node_events=False,
            device_info_configmap=False,
            fault_config_configmap=False,
        )
    )
    assert verbs == {
        "rbac:resourceslices": ("get", "list", "watch", "create", "update", "delete"),
        "rbac:resourceclaims": ("get",),
        "rbac:nodes": ("get",),
    }


async def test_a_missing_resourceslices_rule_is_named_with_its_api_group(
    doctor_py_root: DoctorRoot, apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    apiserver.deny("delete", "resourceslices")
    found = await doctor_py_root.run(kubeconfig=kubeconfig, serve="dra")
    slices = found["rbac:resourceslices"]
    assert slices.status is Status.PROBLEM
    assert slices.detail.startswith("denied: delete resourceslices cluster-wide, which serve=dra need(s)")
    assert slices.fix is not None
    rule = '{apiGroups: ["resource.k8s.io"], resources: ["resourceslices"], verbs: ["delete"]}'
    assert slices.fix.startswith(f"add the rule {rule} to the plugin's ClusterRole")
    assert "kubectl auth can-i delete resourceslices.resource.k8s.io --as=" in slices.fix
    assert found["rbac:resourceclaims"].status is Status.OK


def test_a_950_node_asks_for_the_status_its_leftover_resource_leaves() -> None:
    """nodes/status patch: reviewed on a family with leftover resources only, a warning when denied."""
    from backends.families.ascend910 import ASCEND_910
    from backends.families.ascend950 import ASCEND_950

    settings = Settings(backend="fake", fake_scenario=Path("/s"), pod_namespace="ascend")
    [status] = [p for p in needed_permissions(settings, ASCEND_950) if p.resource == "nodes/status"]
    assert (status.verbs, status.features) == (("patch",), ("node_labels",))
    assert status.without == "huawei.com/Ascend910 left on the node is said with the command, not removed"
    assert not [p for p in needed_permissions(settings, ASCEND_910) if p.resource == "nodes/status"]
    assert not [p for p in needed_permissions(settings) if p.resource == "nodes/status"]
    quiet = Settings(backend="fake", fake_scenario=Path("/s"), node_labels=False)
    assert not [p for p in needed_permissions(quiet, ASCEND_950) if p.resource == "nodes/status"]


async def test_a_denied_status_patch_is_a_warning_saying_what_the_plugin_does_instead(
    apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    from ascend_plugin.doctor.rbac import _reviewed
    from ascend_plugin.kubeapi.client import connect
    from backends.families.ascend950 import ASCEND_950

    settings = Settings(backend="fake", fake_scenario=Path("/s"), node_name="node-1")
    [status] = [p for p in needed_permissions(settings, ASCEND_950) if p.resource == "nodes/status"]
    kube = await connect(kubeconfig)
    try:
        assert (await _reviewed(kube, status)).status is Status.OK
        apiserver.deny("patch", "nodes/status")
        denied = await _reviewed(kube, status)
    finally:
        await kube.close()
    assert denied.status is Status.WARNING
    assert denied.detail == (
        "denied: patch nodes/status cluster-wide; without it huawei.com/Ascend910 left on the node is said "
        "with the command, not removed"
    )
    assert denied.fix == "the chart grants it with rbac.removeStaleResources=true (the default)"
