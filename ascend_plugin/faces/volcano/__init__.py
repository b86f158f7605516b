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

Nothing here is imported unless ``volcano`` is on: it imports kubernetes-asyncio.
"""
