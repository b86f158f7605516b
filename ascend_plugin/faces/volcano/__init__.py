"""Volcano mode: the scheduler chooses the chips, the plugin hands over exactly those.

Volcano (with Huawei's ascend-for-volcano plugin) binds a pod to a node with the
chips it chose in the annotation ``huawei.com/<type>`` and a ``predicate-time``.
The kubelet then asks Allocate for *some* n device IDs of the resource. This
face answers which chips those are (:mod:`.chooser`): the earliest-predicated
pod of this node waiting for n chips, taken from a watch cache of the node's pods
(:mod:`.pod_cache`) and marked consumed at once. It keeps the kubelet ID -> chip
map (:class:`~ascend_plugin.offers.assignments.Assignments`) that ListAndWatch
reports health through, writes ``huawei.com/kltDev``, ``huawei.com/AscendReal``
and the rank table onto each pod that holds its chips (:mod:`.annotations`),
rebuilds the map after a restart from the kubelet's PodResources API (asked
through :mod:`ascend_plugin.holdings`, which resolves the kubelet's IDs through
that map) and, while the kubelet does not answer, tells the node which chips
pods hold from their annotations
(:class:`~ascend_plugin.offers.assignments.HeldChips`).

Nothing here is imported unless ``volcano`` is on (it imports kubernetes-asyncio),
except :mod:`.unfollowed`, which with Volcano mode off says when Volcano places pods
here anyway; whether it runs is decided here, without importing it.
"""

from __future__ import annotations

from ascend_plugin.settings import Settings


def checks_volcano_choices(settings: Settings) -> bool:
    """Whether the plugin looks for Volcano's choices it would not follow (:mod:`.unfollowed`).

    Only where Volcano can place NPU pods on the node (it schedules from the
    device-info ConfigMap) and the plugin does not follow Volcano: the device
    plugin, Volcano mode off, with a node name (and so the Kubernetes side).
    """
    return (
        settings.serve == "device-plugin"
        and not settings.volcano
        and settings.device_info_configmap
        and bool(settings.node_name)
    )
