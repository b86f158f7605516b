"""The node's pods on the API server: a watch cache Allocate reads, and the annotation patches written back.

A pod served is marked consumed in the cache at once (:meth:`PodCache.consume`), and the mark outlives watch
events that still show the old value: a second Allocate never takes the same pod, even while the API server is
away. Patches of one pod merge while they wait and name the pod's UID as a precondition (a pod re-created
under the same name never gets another's chips); a pod that is gone (404, 409) drops its patch, other failures
are retried with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from ascend_plugin.changes import Changes
from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod, parse_pod
from ascend_plugin.kubeapi.client import PODS, JsonObject, Kube
from ascend_plugin.kubeapi.errors import Conflict, KubeError, NotFound, Unreachable
from ascend_plugin.kubeapi.reflector import Reflector
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)


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


@dataclass
class _Pending:
    namespace: str
    name: str
    annotations: dict[str, str] = field(default_factory=dict)


class PodPatcher:
    """Writes the annotations asked for, pod by pod, until each patch lands."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._wake = Changes()  # bumped when a patch is asked for
        self.written = 0  # patches that landed

    def pending(self, uid: str) -> Mapping[str, str]:
        """The annotations still to be written on the pod with ``uid``."""
        entry = self._pending.get(uid)
        return dict(entry.annotations) if entry else {}

    def want(self, pod: Pod, annotations: Mapping[str, str]) -> None:
        """Have ``annotations`` written on ``pod`` as soon as the API server takes them."""
        entry = self._pending.setdefault(pod.uid, _Pending(pod.namespace, pod.name))
        entry.annotations.update(annotations)
        self._wake.bump()

    async def run(self, kube: Kube) -> None:
        retry = Retrier("pod annotations")
        woken = 0
        while True:
            woken = await self._wake.wait_for_change(woken)
            while self._pending:
                uid = next(iter(self._pending))
                entry = self._pending.pop(uid)
                try:
                    await self._patch(kube, uid, entry)
                except (NotFound, Conflict) as error:
                    log.info(
                        "pod %s/%s is gone; its annotations are dropped (%s)",
                        entry.namespace,
                        entry.name,
                        error,
                    )
                except KubeError as error:
                    # Put the failed patch back, under anything asked for it since.
                    if (newer := self._pending.pop(uid, None)) is not None:
                        entry.annotations.update(newer.annotations)
                    self._pending[uid] = entry
                    await retry.failed(error)
                    continue
                retry.succeeded()

    async def _patch(self, kube: Kube, uid: str, entry: _Pending) -> None:
        body: dict[str, object] = {"metadata": {"uid": uid, "annotations": dict(entry.annotations)}}
        await kube.patch(PODS, entry.name, entry.namespace, body)
        self.written += 1
        log.info(
            "pod %s/%s annotated: %s",
            entry.namespace,
            entry.name,
            ", ".join(sorted(entry.annotations)),
            extra={"pod": f"{entry.namespace}/{entry.name}", "annotations": sorted(entry.annotations)},
        )
