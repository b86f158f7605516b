"""A watch cache of this node's pods, with the marks of pods this plugin served.

Allocate reads candidates here, not from the API server. A pod served is marked
consumed at once (:meth:`PodCache.consume`), and the mark outlives watch events
that still show the old value until the API server shows it: a second Allocate
never takes the same pod, even while the API server is away.
"""

from __future__ import annotations

from ascend_plugin.changes import Changes
from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod, parse_pod
from ascend_plugin.kubeapi.client import PODS, JsonObject, Kube
from ascend_plugin.kubeapi.errors import Unreachable
from ascend_plugin.kubeapi.reflector import Reflector


class PodCache:
    """This node's pods, current with the API server while it answers."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.changes = Changes()  # a pod appears, changes, goes or is served here
        self._consumed: set[str] = set()  # UIDs served here whose mark the API server does not show yet
        self._pods: Reflector[Pod] | None = None  # set by run(), once connected
        self._following = False  # run() is following the pods with a live client

    @property
    def synced(self) -> bool:
        """True after the first complete list."""
        return self._pods is not None and self._pods.synced

    def pods(self) -> list[Pod]:
        """The node's pods as last seen, with the marks of those served here."""
        if self._pods is None:
            return []
        return [self._marked(pod) for pod in self._pods.store.values()]

    def consumed(self, pod: Pod) -> bool:
        """True once this plugin served the pod, whatever the API server says yet."""
        return pod.uid in self._consumed

    def consume(self, pod: Pod) -> None:
        """Mark ``pod`` served, here and now (its patch follows)."""
        # The marks of pods that are gone go with them.
        self._consumed &= {known.uid for known in self.pods()}
        self._consumed.add(pod.uid)
        self.changes.bump()

    async def list_fresh(self) -> list[Pod]:
        """The node's pods as the API server lists them now; the cache takes them over."""
        if self._pods is None or not self._following:
            raise Unreachable("not connected to the API server (the pod watch is starting)")
        await self._pods.relist()
        return self.pods()

    async def run(self, kube: Kube) -> None:
        """Follow the node's pods until cancelled; ``kube`` serves :meth:`list_fresh` meanwhile."""
        self._pods = Reflector(
            kube,
            PODS,
            self._parsed,
            part=f"pods of node {self.node_name}",
            field_selector=f"spec.nodeName={self.node_name}",
            changes=self.changes,
        )
        self._following = True
        try:
            await self._pods.run()
        finally:
            self._following = False

    def _parsed(self, obj: JsonObject) -> Pod:
        """A pod as the API server sent it; once it shows our mark, the mark is the API server's."""
        pod = parse_pod(obj)
        if pod.uid in self._consumed and pod.annotations.get(PREDICATE_TIME) == str(CONSUMED):
            self._consumed.discard(pod.uid)
        return pod

    def _marked(self, pod: Pod) -> Pod:
        if pod.uid in self._consumed:
            return pod.with_annotations({PREDICATE_TIME: str(CONSUMED)})
        return pod
