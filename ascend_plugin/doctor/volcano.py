"""Check that Volcano does not place pods here while Volcano mode is off (faces/volcano/unfollowed.py).

A pod holding this node's chips that carries Volcano's allocation annotation got the kubelet's pick.
"""

from __future__ import annotations

from ascend_plugin.doctor.check import Findings, check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, NotApplicable, how_to_set
from ascend_plugin.doctor.rbac import require_cluster
from ascend_plugin.faces.volcano import checks_volcano_choices
from ascend_plugin.holdings.pod_resources import PodResourcesClient

VOLCANO_CHOICES = "volcano-choices"


@check(VOLCANO_CHOICES)
async def volcano_choices(context: Context) -> Findings:
    """No pod holding the node's chips carries Volcano's allocation while Volcano mode is off."""
    settings = context.settings
    if settings.volcano:
        raise NotApplicable("Volcano mode is on: the chips handed over are Volcano's choice")
    if not checks_volcano_choices(settings):
        raise NotApplicable("Volcano places no NPU pod here: serve=dra, or no device-info ConfigMap")
    require_cluster(context)
    listing = await PodResourcesClient(context.host(str(settings.pod_resources_socket))).listing()
    if listing is None:
        raise NotApplicable("the kubelet's PodResources API did not answer: which pods hold chips is unknown")
    resources = (
        {context.table.resource_name}
        if context.family is not None
        else {
            resource for entry in listing for resource in entry.devices if resource.startswith("huawei.com/")
        }
    )
    pods = sorted({f"{e.ref.namespace}/{e.ref.pod}" for e in listing if resources & e.devices.keys()})
    from ascend_plugin.faces.volcano.unfollowed import problem, volcano_choice
    from ascend_plugin.kubeapi.client import PODS, connect
    from ascend_plugin.kubeapi.errors import KubeError, NotFound

    found = []
    try:
        kube = await connect(settings.kubeconfig)
        try:
            for key in pods:
                namespace, _, name = key.partition("/")
                try:
                    obj = await kube.get(PODS, name, namespace)
                except NotFound:
                    continue
                if (choice := volcano_choice(obj, resources)) is not None:
                    found.append(choice)
        finally:
            await kube.close()
    except KubeError as error:
        return Finding.problem(
            VOLCANO_CHOICES,
            f"cannot read the pods holding this node's chips: {error}",
            fix="the API server must be reachable, and the plugin allowed to get pods (the rbac findings)",
        )
    if found:
        return Finding.problem(
            VOLCANO_CHOICES,
            problem(found),
            fix=f"set {how_to_set('volcano', True)} if Volcano schedules this node's NPU jobs; otherwise "
            "schedule them without Volcano's Ascend plugin (docs/volcano.md)",
        )
    return Finding.ok(
        VOLCANO_CHOICES,
        f"none of the {len(pods)} pod(s) holding this node's chips carries Volcano's allocation",
    )
