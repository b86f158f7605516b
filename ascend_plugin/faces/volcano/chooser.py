"""VolcanoChooser: the real chips for an Allocate, from the pod Volcano bound for it.

One choice at a time, so two Allocates never take the same pod; three attempts
a second apart, the last listing the node's pods from the API server. The pod
is marked consumed in the cache at once and its patch queued. docs/volcano.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from ascend_plugin.faces.volcano.candidates import Selection, select
from ascend_plugin.faces.volcano.patcher import PodPatcher
from ascend_plugin.faces.volcano.pod_cache import PodCache
from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod
from ascend_plugin.grpc_guard.refusals import CannotServe
from ascend_plugin.grpc_guard.status import listed
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.holdings.resolve import Assignments
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.offers.book import OfferBook

log = logging.getLogger(__name__)

ATTEMPTS = 3
ATTEMPT_INTERVAL = 1.0  # seconds between attempts
QUOTED = 80  # characters of an annotation a refusal quotes


@dataclass(frozen=True)
class Served:
    """One pod's Allocate: the kubelet's IDs and the chips handed over for them."""

    kubelet_ids: tuple[str, ...]
    real_ids: tuple[str, ...]


class VolcanoChooser:
    """Names the chips Volcano chose, for Allocates of the node's whole-chip resource."""

    def __init__(
        self,
        resource: str,
        book: OfferBook,
        pods: PodCache,
        *,
        patcher: PodPatcher,
        assignments: Assignments,
        held: HeldChips,
        interval: float = ATTEMPT_INTERVAL,
    ) -> None:
        self.resource = resource
        self.book = book
        self.pods = pods
        self.patcher = patcher
        self.assignments = assignments
        self.held = held  # the pods the kubelet lists as holding the resource are no candidates
        self.interval = interval
        # By pod UID, this run's Allocates: what the annotation writer has where the kubelet cannot say.
        self.served: dict[str, Served] = {}
        self._lock = anyio.Lock()

    def decides(self, resource: str) -> bool:
        return resource == self.resource

    async def choose(self, resource: str, kubelet_ids: Sequence[str]) -> tuple[str, ...]:
        order = {device.id: index for index, device in enumerate(self.book.devices(resource))}
        ids = sorted(kubelet_ids, key=lambda device_id: order.get(device_id, len(order)))
        if len(ids) == len(order):
            log.info("Allocate of every %s chip of the node: no lookup", resource)
            self.assignments.record(resource, ids, ids)
            return tuple(ids)
        async with self._lock:
            pod = await self._find(resource, len(ids))
            self.pods.consume(pod)  # wakes the annotation writer too
            self.patcher.want(pod, {PREDICATE_TIME: str(CONSUMED)})
        chosen = pod.chosen(resource) or ()
        unknown = [chip for chip in chosen if chip not in order]
        if unknown or len(set(chosen)) != len(chosen):
            problem = f"names {listed(unknown)}, not on this node" if unknown else "names a chip twice"
            raise CannotServe(
                "chosen-unknown",
                f"pod {pod.key} was chosen for {len(ids)} {resource} chip(s), but its {resource} annotation "
                f"{_quoted(pod.annotations.get(resource, ''))} {problem} (devices: {listed(list(order))})",
            )
        real = sorted(chosen, key=order.__getitem__)
        self.assignments.record(resource, ids, real)
        self.served[pod.uid] = Served(tuple(ids), tuple(real))
        log.info(
            "Volcano chose %s for pod %s (predicate-time %d)",
            ",".join(real),
            pod.key,
            pod.predicate_time,
            extra={"pod": pod.key, "devices": real, "kubelet_ids": ids},
        )
        return tuple(real)

    async def _find(self, resource: str, count: int) -> Pod:
        list_error = ""
        selection = Selection(None, ())
        for attempt in range(1, ATTEMPTS + 1):
            pods = self.pods.pods()
            if attempt == ATTEMPTS:
                try:
                    pods = await self.pods.list_fresh()
                    list_error = ""
                except KubeError as error:
                    list_error = str(error)
            holding = {f"{namespace}/{name}" for namespace, name in self.held.device_ids(resource)}
            selection = select(pods, resource, count, consumed=self.pods.consumed, holding=holding)
            if selection.pod is not None:
                return selection.pod
            log.debug("no pod for %d %s chip(s) (attempt %d)", count, resource, attempt)
            if attempt < ATTEMPTS:
                await anyio.sleep(self.interval)
        where = f"; listing from the API server failed: {list_error}" if list_error else ""
        raise CannotServe(
            "no-candidate",
            f"Volcano mode: no pod on node {self.pods.node_name} is waiting for {count} {resource} chip(s) "
            f"after {ATTEMPTS} attempts{where}. Passed over: {selection.describe_misses()}",
        )


def _quoted(value: str) -> str:
    """An annotation's value for a message: quoted whole when short, else its start and its length."""
    if len(value) <= QUOTED:
        return repr(value)
    return f"{value[:QUOTED]!r}... ({len(value)} characters)"
