"""A watch cache of this node's pods, with the marks of pods this plugin served.

Allocate must not wait for the API server when it can help it, so candidates
come from here: one list of ``spec.nodeName=<node>`` pods, then a watch from its
resourceVersion (renewed when the server ends it, listed again after 410 Gone).
:meth:`PodCache.list_fresh` lists from the API server for the last attempt of a
choice and refreshes the cache with what it got.

A pod this plugin served is marked consumed here at once (:meth:`PodCache.consume`),
before its ``predicate-time`` patch reaches the API server, and the mark outlives
watch events that still show the old value: a second Allocate never takes the
same pod, even while the API server is away.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import aclosing

import anyio

from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod, parse_pod
from ascend_plugin.kubeapi.client import PODS, Kube, Listing
from ascend_plugin.kubeapi.errors import Gone, KubeError, Unreachable
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)


class PodCache:
    """This node's pods by UID, current with the API server while it answers."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.kube: Kube | None = None  # set by run(), once connected
        self.synced = False  # True after the first complete list
        self._pods: dict[str, Pod] = {}
        self._consumed: set[str] = set()
        self._version = 0
        self._changed = anyio.Event()

    @property
    def selector(self) -> str:
        return f"spec.nodeName={self.node_name}"

    @property
    def version(self) -> int:
        """Increases whenever a pod appears, changes or goes."""
        return self._version

    async def wait_for_change(self, seen_version: int) -> int:
        """Return the version once it differs from ``seen_version``."""
        while self._version == seen_version:
            await self._changed.wait()
        return self._version

    def pods(self) -> list[Pod]:
        """The node's pods as last seen."""
        return list(self._pods.values())

    def get(self, uid: str) -> Pod | None:
        return self._pods.get(uid)

    def consumed(self, pod: Pod) -> bool:
        """True once this plugin served the pod, whatever the API server says yet."""
        return pod.uid in self._consumed

    def consume(self, pod: Pod) -> None:
        """Mark ``pod`` served, here and now (its patch follows)."""
        self._consumed.add(pod.uid)
        if pod.uid in self._pods:
            self._pods[pod.uid] = self._pods[pod.uid].with_annotations({PREDICATE_TIME: str(CONSUMED)})
        self._bump()

    async def list_fresh(self) -> list[Pod]:
        """The node's pods as the API server lists them now; the cache takes them over."""
        if self.kube is None:
            raise Unreachable("not connected to the API server yet")
        self._replace(await self.kube.list(PODS, None, self.selector))
        return self.pods()

    async def run(self, kube: Kube) -> None:
        """Follow the node's pods forever; API failures are retried with backoff.

        ``kube`` serves :meth:`list_fresh` only while this runs: the face closes it when its run ends.
        """
        self.kube = kube
        retry = Retrier(f"pods of node {self.node_name}")
        try:
            while True:
                try:
                    await self._list_and_watch(kube, retry)
                except Gone:
                    log.debug("watch of the pods of %s expired (410 Gone); listing again", self.node_name)
                except KubeError as error:
                    await retry.failed(error)
        finally:
            self.kube = None

    async def _list_and_watch(self, kube: Kube, retry: Retrier) -> None:
        listing = await kube.list(PODS, None, self.selector)
        retry.succeeded()
        self._replace(listing)
        version = listing.resource_version
        while True:
            async with aclosing(kube.watch(PODS, None, self.selector, version)) as events:
                async for event in events:
                    version = event.resource_version or version
                    if event.type == "BOOKMARK":
                        continue
                    pod = parse_pod(event.object)
                    if event.type == "DELETED":
                        self._forget([pod.uid])
                    else:
                        self._store([pod])

    def _replace(self, listing: Listing) -> None:
        pods = [parse_pod(item) for item in listing.items]
        gone = set(self._pods) - {pod.uid for pod in pods}
        self._forget(gone)
        self._store(pods)
        if not self.synced:
            self.synced = True
            log.info("following %d pod(s) of node %s", len(pods), self.node_name)

    def _store(self, pods: Iterable[Pod]) -> None:
        for seen in pods:
            pod = seen
            if pod.uid in self._consumed:
                if pod.annotations.get(PREDICATE_TIME) == str(CONSUMED):
                    self._consumed.discard(pod.uid)  # the API server has the mark now
                else:
                    pod = pod.with_annotations({PREDICATE_TIME: str(CONSUMED)})
            self._pods[pod.uid] = pod
        self._bump()

    def _forget(self, uids: Iterable[str]) -> None:
        for uid in uids:
            self._pods.pop(uid, None)
            self._consumed.discard(uid)
        self._bump()

    def _bump(self) -> None:
        self._version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
