"""Every rendering is a set of valid Kubernetes objects: Helm's lint, then the API schemas.

kubernetes_validate in strict mode rejects unknown and misspelt fields, which
the API server would silently drop (a misspelt `readOnly` is a writable mount).
"""

from __future__ import annotations

import re
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from chart_harness import (
    CHART_DIR,
    FAMILY_FILES,
    NAMESPACE,
    RELEASE,
    VALUES_FILES,
    ChartRenderer,
    Rendering,
    load_values_file,
)

KUBE_VERSIONS = ("1.28", "1.32")

# kubernetes_validate ships the schemas of Kubernetes' own kinds; a CRD's kind has none.
NO_KUBERNETES_SCHEMA = frozenset({"ServiceMonitor"})

# Every optional part switched on, on top of the 310B file.
EVERYTHING_ON: dict[str, Any] = {
    "image": {"registry": "registry.example.com", "digest": "sha256:" + "0" * 64},
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "serviceAccount": {"annotations": {"example.com/owner": "npu-team"}},
    "podAnnotations": {"example.com/scrape": "true"},
    "podLabels": {"team": "npu"},
    "hostNetwork": True,
    "hostLoader": {"enabled": True},
    "httpPort": 9400,
    "extraEnv": [
        {"name": "TZ", "value": "Asia/Shanghai"},
        {"name": "NODE_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ],
    "extraVolumes": [{"name": "localtime", "hostPath": {"path": "/etc/localtime", "type": "File"}}],
    "extraVolumeMounts": [{"name": "localtime", "mountPath": "/etc/localtime", "readOnly": True}],
    "settings": {"logFormat": "json", "sharedNodes": ["/dev/hisi_hdc", "/dev/devmm_svm"]},
    "runtimeConfig": {"healthInterval": 2, "faultLevels": {"SeparateNPU": ["80E01801"]}},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
}
EVERYTHING = "values-310b.yaml + every option"

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.fixture(scope="module")
def every_rendering(chart: ChartRenderer, renderings: dict[str, Rendering]) -> dict[str, Rendering]:
    return {**renderings, EVERYTHING: chart.render_file(FAMILY_FILES["310B"], EVERYTHING_ON)}


@pytest.fixture(scope="module")
def for_each_version(chart: ChartRenderer) -> dict[tuple[str, str], Rendering]:
    """Each case rendered for each Kubernetes version, as `helm install` on that cluster renders it."""
    cases = {**{name: {} for name in VALUES_FILES}, EVERYTHING: EVERYTHING_ON}
    return {
        (case, version): chart.render_file(
            FAMILY_FILES["310B"] if case == EVERYTHING else case, overrides, kube_version=version
        )
        for case, overrides in cases.items()
        for version in KUBE_VERSIONS
    }


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_helm_lint_is_clean(values_file: str) -> None:
    """No error and no warning from `helm lint --strict` (an info about the icon is all)."""
    report = helm.lint(
        CHART_DIR, load_values_file(values_file), strict=True, namespace=NAMESPACE, kube_version="v1.28.0"
    )
    assert report["errors"] == []
    assert [message for message in report["messages"] if message["severity"] >= 2] == []


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("case", [*VALUES_FILES, EVERYTHING])
def test_objects_are_valid_for_kubernetes(
    for_each_version: dict[tuple[str, str], Rendering], case: str, kube_version: str
) -> None:
    for manifest in for_each_version[(case, kube_version)].manifests:
        if manifest["kind"] not in NO_KUBERNETES_SCHEMA:
            kubernetes_validate.validate(manifest, kube_version, strict=True)


def test_only_the_crd_kind_goes_unvalidated(for_each_version: dict[tuple[str, str], Rendering]) -> None:
    """The skip above hides nothing else, and is needed: the validator has no ServiceMonitor schema."""
    rendering = for_each_version[(EVERYTHING, KUBE_VERSIONS[-1])]
    kinds = {manifest["kind"] for manifest in rendering.manifests}
    assert kinds == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "DaemonSet",
        "Service",
        "ServiceMonitor",
        # From 1.30: each node's plugin writes only its own node's objects (rbac.ownNodeOnly).
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(rendering.one("ServiceMonitor"), KUBE_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("case", [*VALUES_FILES, EVERYTHING])
def test_names_the_api_server_checks_beyond_the_schema(
    every_rendering: dict[str, Rendering], case: str
) -> None:
    """Volume and port names: DNS labels, unique; the schemas above do not check them."""
    rendering = every_rendering[case]
    volumes = [volume["name"] for volume in rendering.pod_spec["volumes"]]
    assert len(volumes) == len(set(volumes))
    ports = [port["name"] for port in rendering.container["ports"]]
    assert [name for name in volumes if not DNS_LABEL.match(name) or len(name) > 63] == []
    assert [name for name in ports if not DNS_LABEL.match(name) or len(name) > 15] == []
    mount_paths = [mount["mountPath"] for mount in rendering.container["volumeMounts"]]
    assert len(mount_paths) == len(set(mount_paths))


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_every_object_carries_the_release_labels(renderings: dict[str, Rendering], values_file: str) -> None:
    for manifest in renderings[values_file].manifests:
        labels = manifest["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == RELEASE, manifest["kind"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm", manifest["kind"]


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_notes_tell_how_to_check_the_nodes_capacity(
    renderings: dict[str, Rendering], values_file: str
) -> None:
    rendering = renderings[values_file]
    resource = rendering.plain_env.get("ASCEND_DP_RESOURCE_NAME", "huawei.com/Ascend")
    assert f"kubectl describe node <node> | grep {resource}" in rendering.notes
    assert f"rollout status daemonset/{rendering.daemonset['metadata']['name']}" in rendering.notes
