"""RBAC: every request the plugin makes is allowed, and nothing else.

The rendered Roles and bindings are evaluated the way the API server's RBAC
authorizer does (chart_harness.Rendering.allows), for the plugin's service
account, so a wrong binding subject or namespace fails as surely as a missing verb.
A request names its object where the plugin's does (a get, an update, a list or
watch by ``metadata.name``): ConfigMaps the chart knows by name are granted by name.
"""

from __future__ import annotations

import pytest
from chart_harness import DEFAULTS, VALUES_FILES, ChartRenderer, Rendering

# (verb, API group, resource, namespace or None for cluster scope, object name or None) of each call
# the plugin makes. A create names no object (RBAC cannot limit it by name).
Request = tuple[str, str, str, str | None, str | None]
CONFIG = "ascend-device-plugin-config"  # the release's config ConfigMap
DEVICE_INFO = "mindx-dl-deviceinfo-node-1"  # one node's device-info ConfigMap
FAULT_CONFIG = "mindx-dl-fault-config"


def plugin_requests(release_namespace: str, device_info_namespace: str = "kube-system") -> list[Request]:
    return [
        # Node labels: read and follow our Node, patch its labels.
        *[(verb, "", "nodes", None, None) for verb in ("get", "list", "watch", "patch")],
        # Device-info ConfigMap for Volcano: its name is the node's, so RBAC grants the namespace.
        *[(verb, "", "configmaps", device_info_namespace, DEVICE_INFO) for verb in ("get", "list", "watch")],
        ("create", "", "configmaps", device_info_namespace, None),
        ("update", "", "configmaps", device_info_namespace, DEVICE_INFO),
        # The config ConfigMap, only read, by name.
        *[(verb, "", "configmaps", release_namespace, CONFIG) for verb in ("get", "list", "watch")],
        # Huawei's fault configuration, only read, by name.
        *[(verb, "", "configmaps", "kube-system", FAULT_CONFIG) for verb in ("get", "list", "watch")],
        # Node events go to "default", like the kubelet's own.
        ("create", "", "events", "default", None),
        ("create", "events.k8s.io", "events", "default", None),
        # A pod holding this node's chips, read once: did Volcano choose them?
        ("get", "", "pods", "training", "resnet-0"),
        # `doctor` checks all of the above with SelfSubjectAccessReviews.
        ("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, None),
    ]


# Requests a compromised or buggy plugin must not be able to make.
FORBIDDEN: list[Request] = [
    ("get", "", "configmaps", "default", None),
    ("update", "", "configmaps", "monitoring", None),
    ("list", "", "configmaps", None, None),
    ("get", "", "secrets", "kube-system", None),
    ("delete", "", "configmaps", "kube-system", DEVICE_INFO),
    ("patch", "", "configmaps", "kube-system", DEVICE_INFO),
    ("delete", "", "nodes", None, None),
    ("update", "", "nodes", None, None),
    ("patch", "", "nodes/status", None, None),
    ("list", "", "pods", None, None),
    ("watch", "", "pods", None, None),
    ("patch", "", "pods", "training", "resnet-0"),
    ("create", "", "pods", "kube-system", None),
    ("list", "", "events", "default", None),
]

# Outside kube-system, the release's namespace holds only the config ConfigMap: nothing else there.
FORBIDDEN_IN_THE_RELEASE_NAMESPACE: list[Request] = [
    ("get", "", "configmaps", "npu-system", "another-config"),
    ("list", "", "configmaps", "npu-system", None),
    ("create", "", "configmaps", "npu-system", None),
    ("update", "", "configmaps", "npu-system", CONFIG),
    ("patch", "", "configmaps", "npu-system", CONFIG),
]


@pytest.fixture(scope="module")
def elsewhere(chart: ChartRenderer) -> Rendering:
    """A release outside kube-system, where the device-info ConfigMap still lives."""
    return chart.render({}, namespace="npu-system")


@pytest.mark.parametrize("values_file", VALUES_FILES)
@pytest.mark.parametrize("request_", plugin_requests("kube-system"), ids=str)
def test_every_plugin_request_is_allowed(
    renderings: dict[str, Rendering], values_file: str, request_: Request
) -> None:
    assert renderings[values_file].allows(*request_)


@pytest.mark.parametrize("request_", plugin_requests("npu-system"), ids=str)
def test_every_plugin_request_is_allowed_outside_kube_system(elsewhere: Rendering, request_: Request) -> None:
    assert elsewhere.allows(*request_)


@pytest.mark.parametrize("request_", FORBIDDEN, ids=str)
def test_nothing_beyond_what_the_plugin_does(
    renderings: dict[str, Rendering], elsewhere: Rendering, request_: Request
) -> None:
    assert not renderings[DEFAULTS].allows(*request_)
    assert not elsewhere.allows(*request_)


@pytest.mark.parametrize("request_", FORBIDDEN_IN_THE_RELEASE_NAMESPACE, ids=str)
def test_the_release_namespace_gives_only_the_config_configmap_to_read(
    elsewhere: Rendering, request_: Request
) -> None:
    assert not elsewhere.allows(*request_)


def test_configmaps_known_by_name_are_granted_by_name(renderings: dict[str, Rendering]) -> None:
    """The config ConfigMap and mindx-dl-fault-config: resourceNames, read verbs only."""
    rules = [rule for role in renderings[DEFAULTS].of_kind("Role") for rule in role["rules"]]
    named = {tuple(rule["resourceNames"]): rule["verbs"] for rule in rules if rule.get("resourceNames")}
    assert named == {(CONFIG,): ["get", "list", "watch"], (FAULT_CONFIG,): ["get", "list", "watch"]}
    unnamed = [rule["verbs"] for rule in rules if not rule.get("resourceNames")]
    assert unnamed == [["get", "list", "watch", "create", "update"]], "the device-info ConfigMap's, per node"


def test_rules_are_exactly_the_plugins_verbs(renderings: dict[str, Rendering]) -> None:
    """Every granted (group, resource, verb) is one the plugin uses; no wildcards, no resourceNames."""
    rendering = renderings[DEFAULTS]
    granted = {
        (group, resource, verb)
        for role in rendering.of_kind("ClusterRole") + rendering.of_kind("Role")
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    used = {(group, resource, verb) for verb, group, resource, *_ in plugin_requests("kube-system")}
    assert granted == used


def test_configmap_access_follows_the_device_info_namespace(chart: ChartRenderer) -> None:
    rendering = chart.render({"settings": {"deviceInfoNamespace": "volcano-system"}}, namespace="npu-system")
    for request_ in plugin_requests("npu-system", "volcano-system"):
        assert rendering.allows(*request_), request_
    assert not rendering.allows("update", "", "configmaps", "kube-system", DEVICE_INFO)


def test_no_device_info_no_access_to_its_namespace(chart: ChartRenderer) -> None:
    rendering = chart.render(
        {"settings": {"deviceInfoConfigmap": False, "faultConfigConfigmap": False}}, namespace="npu-system"
    )
    assert rendering.allows("watch", "", "configmaps", "npu-system", CONFIG), "the config ConfigMap is read"
    assert not rendering.allows("get", "", "configmaps", "kube-system", DEVICE_INFO)


@pytest.mark.parametrize(
    "settings",
    [{"deviceInfoConfigmap": False}, {"deviceInfoNamespace": "volcano-system"}],
    ids=["no device-info ConfigMap", "device-info elsewhere"],
)
def test_the_fault_configuration_is_only_read_in_kube_system(
    chart: ChartRenderer, settings: dict[str, object]
) -> None:
    rendering = chart.render({"settings": settings}, namespace="npu-system")
    for verb in ("get", "list", "watch"):
        assert rendering.allows(verb, "", "configmaps", "kube-system", FAULT_CONFIG), verb
        assert not rendering.allows(verb, "", "configmaps", "kube-system", "coredns"), verb
    for verb in ("create", "update", "patch", "delete"):
        assert not rendering.allows(verb, "", "configmaps", "kube-system", FAULT_CONFIG), verb


def test_one_role_when_both_configmaps_share_a_namespace(renderings: dict[str, Rendering]) -> None:
    assert [role["metadata"]["namespace"] for role in renderings[DEFAULTS].of_kind("Role")] == ["kube-system"]


def test_rbac_can_be_brought_by_the_operator(chart: ChartRenderer) -> None:
    rendering = chart.render(
        {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "npu-agent"}}
    )
    assert not [
        m
        for m in rendering.manifests
        if m["kind"] in {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    ]
    assert not rendering.of_kind("ServiceAccount")
    assert rendering.pod_spec["serviceAccountName"] == "npu-agent"


def test_the_pod_runs_as_the_bound_service_account(renderings: dict[str, Rendering]) -> None:
    rendering = renderings[DEFAULTS]
    account = rendering.one("ServiceAccount")
    assert rendering.pod_spec["serviceAccountName"] == account["metadata"]["name"]
    assert account["metadata"]["namespace"] == rendering.namespace


def _publisher_requests(release_namespace: str, device_info_namespace: str) -> list[Request]:
    """What the publisher table (faces/kube/publishers.py) says each enabled publisher needs.

    Each request names its object as doctor's review does (doctor/rbac.py: the plugin's own names).
    """
    from ascend_plugin.doctor.rbac import needed_permissions
    from ascend_plugin.settings import Settings

    settings = Settings(
        backend="fake",
        fake_scenario="/s.json",  # type: ignore[arg-type]
        node_name="node-1",
        pod_namespace=release_namespace,
        config_configmap=CONFIG,
        device_info_namespace=device_info_namespace,
    )
    return [
        (verb, permission.group, permission.resource, permission.namespace, name)
        for permission in needed_permissions(settings)
        for verb, name in permission.reviews
    ]


@pytest.mark.parametrize("device_info_namespace", ["kube-system", "volcano-system"])
@pytest.mark.parametrize("release_namespace", ["kube-system", "npu-system"])
def test_the_chart_grants_what_the_publisher_table_says(
    chart: ChartRenderer, release_namespace: str, device_info_namespace: str
) -> None:
    """The table that starts the publishers and drives doctor's RBAC check is what the chart grants."""
    values = {"settings": {"deviceInfoNamespace": device_info_namespace}}
    rendering = chart.render(values, namespace=release_namespace)
    wanted = _publisher_requests(release_namespace, device_info_namespace)
    denied = [request for request in wanted if not rendering.allows(*request)]
    assert denied == []
