"""Check of the plugin's permissions, asked of the API server itself (one SelfSubjectAccessReview per verb).

kubernetes-asyncio is imported only where the API server is asked: it costs tens of MB.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ascend_plugin.doctor.check import Findings, check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide, NotApplicable
from ascend_plugin.faces.dra.rbac import DRA_GRANTS
from ascend_plugin.faces.kube.publishers import PUBLISHERS
from ascend_plugin.faces.volcano import checks_volcano_choices
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME as FAULT_CONFIG_NAME
from ascend_plugin.settings import Settings
from backends.families import FamilyTable

if TYPE_CHECKING:
    from ascend_plugin.kubeapi.client import Kube

RBAC = "rbac"
_CHART_FIX = "the chart's rbac.create=true (the default) grants every one of them"
_VERB_ORDER: Final = ("get", "list", "watch", "create", "update", "patch", "delete")


@dataclass(frozen=True)
class Permission:
    """Verbs on one resource in one place (namespace None: cluster-scoped or cluster-wide)."""

    resource: str
    namespace: str | None
    verbs: tuple[str, ...]
    role: str  # where the chart grants it
    features: tuple[str, ...]
    group: str = ""  # the API group; "" is the core group
    # (verb, object name) of each request: the name where the plugin knows the object's, None otherwise
    reviews: tuple[tuple[str, str | None], ...] = ()
    without: str | None = None  # what the plugin does when refused (a warning); None: it needs it

    @property
    def name(self) -> str:
        return f"rbac:{self.resource}" + (f"/{self.namespace}" if self.namespace else "")

    @property
    def where(self) -> str:
        return f"in namespace {self.namespace}" if self.namespace else "cluster-wide"


# Volcano mode (ascend_plugin/faces/volcano): this node's pods, patched with its annotations, and the
# node's InternalIP for the rank table. Written out here: the face itself imports kubernetes-asyncio.
VOLCANO_GRANTS: Final = (("pods", ("get", "list", "watch", "patch")), ("nodes", ("get",)))
# Volcano mode off where Volcano may place pods: each pod holding the node's chips is read once, to
# warn when Volcano chose them (faces/volcano/unfollowed.py).
VOLCANO_CHECK_GRANTS: Final = (("pods", ("get",)),)


def _object(settings: Settings, feature: str) -> str | None:
    """The ConfigMap a publisher reads or writes, by name (the chart grants the named ones by name)."""
    if feature == "config_configmap":
        return settings.config_configmap
    if feature == "fault_config_configmap":
        return FAULT_CONFIG_NAME
    if feature == "device_info_configmap" and settings.node_name:
        return settings.device_info_name_prefix + settings.node_name
    return None


def needed_permissions(settings: Settings, family: FamilyTable | None = None) -> list[Permission]:
    """What the enabled Kubernetes publishers (and Volcano mode) need, merged per resource and namespace;
    with ``family``, what it adds (a 950 node: nodes/status, to remove the leftover huawei.com/Ascend910)."""
    wanted = [
        (publisher.setting, "", grant.resource, grant.namespace, grant.verbs)
        for publisher in PUBLISHERS
        if publisher.enabled(settings)
        for grant in publisher.grants(settings)
    ]
    optional = {}
    for publisher in PUBLISHERS:
        for grant in publisher.family_grants(family) if family and publisher.enabled(settings) else ():
            wanted.append((publisher.setting, "", grant.resource, grant.namespace, grant.verbs))
            optional[grant.resource] = grant.without
    if settings.volcano:
        wanted += [("volcano", "", resource, None, verbs) for resource, verbs in VOLCANO_GRANTS]
    elif checks_volcano_choices(settings):
        wanted += [("volcano check", "", resource, None, verbs) for resource, verbs in VOLCANO_CHECK_GRANTS]
    if settings.serve == "dra":
        wanted += [("serve=dra", grant.group, grant.resource, None, grant.verbs) for grant in DRA_GRANTS]
    merged: dict[tuple[str, str, str | None], Permission] = {}
    for feature, group, resource, namespace, verbs in wanted:
        earlier = merged.get((group, resource, namespace))
        all_verbs = set(verbs) | set(earlier.verbs if earlier else ())
        features = (*(earlier.features if earlier else ()), feature)
        name = _object(settings, feature) if resource == "configmaps" else None
        # A create names no object: RBAC cannot limit it by name, nor does the review.
        reviews = [(verb, None if verb == "create" else name) for verb in verbs]
        merged[(group, resource, namespace)] = Permission(
            resource,
            namespace,
            tuple(verb for verb in _VERB_ORDER if verb in all_verbs),
            "Role in namespace " + namespace if resource == "configmaps" and namespace else "ClusterRole",
            tuple(dict.fromkeys(features)),
            group,
            tuple(dict.fromkeys([*(earlier.reviews if earlier else ()), *reviews])),
            optional.get(resource),
        )
    return list(merged.values())


def require_cluster(context: Context) -> None:
    """NotApplicable unless the API server can be asked: NODE_NAME set, and credentials to ask with."""
    if not context.settings.node_name:
        raise NotApplicable("the Kubernetes features are off while NODE_NAME is unset (see node-name)")
    if context.settings.kubeconfig is None and "KUBERNETES_SERVICE_HOST" not in context.environ:
        raise NotApplicable(
            "no cluster credentials: not in a pod, and no kubeconfig given (--kubeconfig PATH checks the "
            "permissions of that kubeconfig's user)"
        )


@check(RBAC)
async def permissions(context: Context) -> Findings:
    """Every verb the enabled features need is allowed, by the API server's own reckoning."""
    settings = context.settings
    require_cluster(context)
    from ascend_plugin.kubeapi.client import connect
    from ascend_plugin.kubeapi.errors import KubeConfigError, KubeError

    wanted = needed_permissions(settings, context.family)
    if not wanted:
        raise NotApplicable("every Kubernetes feature is off in the settings")
    try:
        kube = await connect(settings.kubeconfig)
    except KubeConfigError as error:
        return Finding.problem(
            RBAC,
            str(error),
            fix="in the pod, mount its service-account token (automountServiceAccountToken must not be "
            "false); outside, pass a working --kubeconfig",
        )
    try:
        return [await _reviewed(kube, permission) for permission in wanted]
    except KubeError as error:
        return Finding.problem(
            RBAC,
            str(error),
            fix="the API server must be reachable from the pod; creating selfsubjectaccessreviews is "
            f"granted to every authenticated user by default, and {_CHART_FIX}",
        )
    finally:
        await kube.close()


async def _reviewed(kube: Kube, permission: Permission) -> Finding:
    refused = {
        verb for verb, name in permission.reviews if not await access_allowed(kube, verb, permission, name)
    }
    denied = [verb for verb in permission.verbs if verb in refused]
    asked = ", ".join(permission.verbs)
    if not denied:
        return Finding.ok(permission.name, f"allowed: {asked} {permission.resource} {permission.where}")
    verbs = ", ".join(denied)
    if permission.without is not None:
        return Finding.warning(
            permission.name,
            f"denied: {verbs} {permission.resource} {permission.where}; without it {permission.without}",
            fix="the chart grants it with rbac.removeStaleResources=true (the default)",
        )
    listed = ", ".join(json.dumps(verb) for verb in denied)
    rule = f'{{apiGroups: ["{permission.group}"], resources: ["{permission.resource}"], verbs: [{listed}]}}'
    namespace = f" -n {permission.namespace}" if permission.namespace else ""
    target = f"{permission.resource}.{permission.group}" if permission.group else permission.resource
    return Finding.problem(
        permission.name,
        f"denied: {verbs} {permission.resource} {permission.where}, which {', '.join(permission.features)} "
        f"need(s); the plugin logs 403 Forbidden ('cannot {denied[0]} resource \"{permission.resource}\"')",
        fix=f"add the rule {rule} to the plugin's {permission.role} ({_CHART_FIX}); check with "
        f"`kubectl auth can-i {denied[0]} {target}{namespace} "
        "--as=system:serviceaccount:<namespace>:<serviceaccount>`",
        see=Guide.RBAC,
    )


async def access_allowed(kube: Kube, verb: str, permission: Permission, name: str | None = None) -> bool:
    """One SelfSubjectAccessReview: may these credentials ``verb`` the resource (object ``name``) there?"""
    import aiohttp
    from kubernetes_asyncio.client import AuthorizationV1Api

    from ascend_plugin.kubeapi.client import REQUEST_TIMEOUT
    from ascend_plugin.kubeapi.errors import KubeError, Unreachable

    attributes: dict[str, str] = {"verb": verb, "group": permission.group, "resource": permission.resource}
    if permission.namespace:
        attributes["namespace"] = permission.namespace
    if name is not None:
        attributes["name"] = name
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    # Kube keeps its ApiClient to itself; the review is the one call it has no method for.
    # Typed as Any: with _preload_content=False the call returns the raw response, not the model.
    api: Any = AuthorizationV1Api(kube.api_client)
    try:
        response = await api.create_self_subject_access_review(
            body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        try:
            raw = await response.read()
        finally:
            response.release()
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        raise Unreachable(
            f"cannot reach the API server at {kube.host}: {error or type(error).__name__}"
        ) from error
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    answer: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    if not 200 <= response.status < 300:
        message = answer.get("message") or raw[:200].decode("utf-8", "replace")
        raise KubeError(
            f"the API server refused a SelfSubjectAccessReview (HTTP {response.status}): {message}"
        )
    status = answer.get("status")
    return isinstance(status, dict) and status.get("allowed") is True
