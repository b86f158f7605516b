"""The Helm chart as the chart tests see it: rendered by Helm's own engine, parsed, queried.

``helm_python`` embeds Helm's Go SDK, so what renders (or fails) here renders
(or fails) the same way under ``helm install``: the same template functions,
the same values coalescing, the same values.schema.json check. A render may name
the release and the cluster's Kubernetes version (``.Capabilities.KubeVersion``,
as ``helm install`` learns it from the API server); by default it is the version
Helm's SDK assumes offline.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import helm_python as helm

ROOT = Path(__file__).resolve().parents[1]
CHART_DIR = ROOT / "charts" / "ascend-device-plugin"
RELEASE = "ascend-device-plugin"
NAMESPACE = "kube-system"

# The chart's defaults alone go by "values.yaml": `helm install` without -f.
DEFAULTS = "values.yaml"
FAMILY_FILES: dict[str, str] = {
    "310": "values-310.yaml",
    "310B": "values-310b.yaml",
    "310P": "values-310p.yaml",
    "910": "values-910.yaml",
    "950": "values-950.yaml",
}
VALUES_FILES: tuple[str, ...] = (DEFAULTS, *FAMILY_FILES.values())

Manifest = dict[str, Any]


def load_values_file(name: str) -> dict[str, Any]:
    """The values a ``-f <name>`` brings; the defaults file brings nothing beyond the chart's own."""
    if name == DEFAULTS:
        return {}
    data = yaml.safe_load((CHART_DIR / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{name} must be a mapping"
    return data


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` on top, maps merged key by key, as Helm layers -f and --set."""
    result = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _rule_allows(rule: Mapping[str, Any], verb: str, group: str, resource: str, name: str | None) -> bool:
    """RBAC's rule match: a rule with resourceNames allows only requests naming one of them."""

    def matches(allowed: Iterable[str], wanted: str) -> bool:
        return "*" in allowed or wanted in allowed

    names = rule.get("resourceNames")
    return (
        (not names or name in names)
        and matches(rule.get("apiGroups", []), group)
        and matches(rule.get("resources", []), resource)
        and matches(rule.get("verbs", []), verb)
    )


@dataclass(frozen=True)
class Rendering:
    """Every manifest of one render, parsed, plus NOTES.txt."""

    manifests: tuple[Manifest, ...]
    notes: str
    namespace: str

    def of_kind(self, kind: str) -> list[Manifest]:
        return [manifest for manifest in self.manifests if manifest["kind"] == kind]

    def one(self, kind: str) -> Manifest:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    @property
    def daemonset(self) -> Manifest:
        return self.one("DaemonSet")

    @property
    def pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.daemonset["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        containers = self.pod_spec["containers"]
        assert len(containers) == 1, "the plugin pod has one container"
        container: dict[str, Any] = containers[0]
        return container

    @property
    def env(self) -> dict[str, dict[str, Any]]:
        """The container's environment entries by name (each name once)."""
        entries = self.container.get("env", [])
        names = [entry["name"] for entry in entries]
        assert len(names) == len(set(names)), f"duplicate env names: {names}"
        return {entry["name"]: entry for entry in entries}

    @property
    def plain_env(self) -> dict[str, str]:
        """The environment variables that have a literal value."""
        return {name: entry["value"] for name, entry in self.env.items() if "value" in entry}

    def volume_at(self, mount_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(volume mount, volume) of whatever the container mounts at ``mount_path``."""
        mounts = [mount for mount in self.container["volumeMounts"] if mount["mountPath"] == mount_path]
        assert len(mounts) == 1, f"{mount_path}: {len(mounts)} mounts"
        volumes = [volume for volume in self.pod_spec["volumes"] if volume["name"] == mounts[0]["name"]]
        assert len(volumes) == 1, f"volume {mounts[0]['name']}: {len(volumes)} definitions"
        return mounts[0], volumes[0]

    def host_paths(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """Host path -> (mount, hostPath volume source) for every hostPath volume mounted."""
        volumes = {volume["name"]: volume for volume in self.pod_spec["volumes"]}
        result = {}
        for mount in self.container["volumeMounts"]:
            source = volumes[mount["name"]].get("hostPath")
            if source is not None:
                result[source["path"]] = (mount, source)
        return result

    def allows(
        self, verb: str, group: str, resource: str, namespace: str | None, name: str | None = None
    ) -> bool:
        """Whether RBAC, as rendered, lets the plugin's service account do this.

        ``namespace`` None asks about a cluster-scoped object (or all
        namespaces at once); ``name`` is the object's (a list or watch names it with
        a ``metadata.name`` field selector). The rules of Kubernetes' RBAC authorizer: a
        ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding its
        Role (or ClusterRole) only in the binding's namespace.
        """
        # Every DaemonSet of a release (one per mode) runs as the one ServiceAccount.
        (account,) = {d["spec"]["template"]["spec"]["serviceAccountName"] for d in self.of_kind("DaemonSet")}
        roles = {
            (role["kind"], role["metadata"].get("namespace"), role["metadata"]["name"]): role
            for role in self.of_kind("ClusterRole") + self.of_kind("Role")
        }
        for binding in self.of_kind("ClusterRoleBinding") + self.of_kind("RoleBinding"):
            binding_namespace = binding["metadata"].get("namespace")
            if binding_namespace is not None and binding_namespace != namespace:
                continue
            if not any(
                subject["kind"] == "ServiceAccount"
                and subject["name"] == account
                and subject["namespace"] == self.namespace
                for subject in binding["subjects"]
            ):
                continue
            ref = binding["roleRef"]
            role_namespace = binding_namespace if ref["kind"] == "Role" else None
            role = roles.get((ref["kind"], role_namespace, ref["name"]))
            if role and any(_rule_allows(rule, verb, group, resource, name) for rule in role["rules"]):
                return True
        return False


class ChartRenderer:
    """Renders the loaded chart as `helm template` would."""

    def __init__(self, chart: helm.Chart) -> None:
        self.chart = chart

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        namespace: str = NAMESPACE,
        release: str = RELEASE,
        kube_version: str | None = None,
    ) -> Rendering:
        """Render with ``values`` over the chart's defaults; Helm's errors propagate.

        ``kube_version`` ("1.33") is the cluster's version the templates see.
        """
        if kube_version is None:
            files = self.chart.render(dict(values or {}), name=release, namespace=namespace)
        else:
            # The SDK's render takes the version through its options, which Chart.render does not pass on.
            from helm_python import _native

            options = {"name": release, "namespace": namespace, "kube_version": f"v{kube_version}.0"}
            files = json.loads(
                _native.call_string(
                    "helm_render", self.chart._raw(), json.dumps(dict(values or {})), json.dumps(options)
                )
            )
        manifests: list[Manifest] = []
        notes = ""
        for path, text in sorted(files.items()):
            if path.endswith("NOTES.txt"):
                notes = text
                continue
            manifests.extend(document for document in yaml.safe_load_all(text) if document)
        return Rendering(tuple(manifests), notes, namespace)

    def render_file(
        self,
        name: str,
        overrides: Mapping[str, Any] | None = None,
        *,
        namespace: str = NAMESPACE,
        release: str = RELEASE,
        kube_version: str | None = None,
    ) -> Rendering:
        """Render with ``-f <name>`` and then ``overrides`` on top."""
        values = merged(load_values_file(name), overrides or {})
        return self.render(values, namespace=namespace, release=release, kube_version=kube_version)
