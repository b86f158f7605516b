"""VolcanoChooser: the real chips for an Allocate, from the pod Volcano bound for it.

The kubelet does not say which pod it admits; as Huawei's plugin does, the pod is the one Volcano predicated
first among those waiting for exactly n chips (:func:`select`: the annotation names n, ``predicate-time`` not
consumed, not finished, deleted or refused by the kubelet, and here: holding nothing yet). Every other pod
that asks for the resource is a near miss, so a refusal says why. One choice at a time; three attempts a
second apart, the last listing the node's pods from the API server; the pod is marked consumed at once.
docs/volcano.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import anyio

from ascend_plugin.faces.volcano.pod_cache import PodCache, PodPatcher
from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod
from ascend_plugin.grpc_guard.refusals import CannotServe
from ascend_plugin.grpc_guard.status import listed
from ascend_plugin.holdings.held import Assignments, HeldChips
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.offers.book import OfferBook

log = logging.getLogger(__name__)

ATTEMPTS = 3
ATTEMPT_INTERVAL = 1.0  # seconds between attempts
QUOTED = 80  # characters of an annotation a refusal quotes
MAX_REASONS = 5  # reasons a refusal names, most common first; the pods of the others are counted
MAX_PODS_PER_REASON = 3  # pods a refusal names for each reason; the others are counted


@dataclass(frozen=True)
class NearMiss:
    """A pod that was passed over, and why."""

    pod: str
    why: str


@dataclass(frozen=True)
class Selection:
    """The chosen pod (None when there is none) and the pods passed over."""

    pod: Pod | None
    near_misses: tuple[NearMiss, ...]

    def describe_misses(self) -> str:
        """The near misses by reason, commonest first, a few pods each and the rest counted: short enough to
        reach the kubelet whole (the status travels in a trailer), yet saying what to fix.
        """
        if not self.near_misses:
            return "no pod on this node asks for it or carries its annotation"
        by_reason: dict[str, list[str]] = {}
        for miss in self.near_misses:
            by_reason.setdefault(miss.why, []).append(miss.pod)
        reasons = sorted(by_reason.items(), key=lambda reason: -len(reason[1]))  # stable: first seen first
        named = [f"{listed(pods, MAX_PODS_PER_REASON)}: {why}" for why, pods in reasons[:MAX_REASONS]]
        others = reasons[MAX_REASONS:]
        if others:
            count = sum(len(pods) for _, pods in others)
            named.append(f"and {count} more for {len(others)} other reason(s)")
        return f"{len(self.near_misses)} pod(s): " + "; ".join(named)


def passed_over(pod: Pod, resource: str, count: int, consumed: bool, holds: bool) -> str:
    """Why ``pod`` is no candidate for ``count`` chips of ``resource``; empty when it is one."""
    if not pod.active:
        return f"phase {pod.phase}"
    if pod.deleting:
        return "being deleted"
    if failed := pod.failed_admission:
        return failed
    if pod.limits.get(resource, 0) <= 0:
        return f"requests no {resource} in its limits"
    chosen = pod.chosen(resource)
    if chosen is None:
        return f"no {resource} annotation (Volcano has not placed it)"
    if len(chosen) != count:
        return f"its {resource} annotation names {len(chosen)} chip(s), the request is for {count}"
    if consumed or pod.predicate_time == CONSUMED:
        raw = pod.annotations.get(PREDICATE_TIME)
        if consumed or raw == str(CONSUMED):
            return "already served (predicate-time consumed)"
        return f"no valid predicate-time ({'missing' if raw is None else repr(raw[:40])})"
    if holds or pod.real is not None:
        return "already holds devices"
    return ""


def select(
    pods: Iterable[Pod],
    resource: str,
    count: int,
    *,
    consumed: Callable[[Pod], bool] = lambda pod: False,
    holding: Collection[str] = (),
) -> Selection:
    """The pod an Allocate of ``count`` chips is for, and the near misses. ``consumed``: this plugin served
    the pod (its mark may not have landed); ``holding``: pods the kubelet lists holding the resource. Ties
    go to the first by namespace/name: a function of the pods, not their order."""
    candidates: list[Pod] = []
    misses: list[NearMiss] = []
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.limits.get(resource, 0) <= 0 and pod.chosen(resource) is None:
            continue  # nothing to do with this resource
        why = passed_over(pod, resource, count, consumed(pod), pod.key in holding)
        if why:
            misses.append(NearMiss(pod.key, why))
        else:
            candidates.append(pod)
    chosen = min(candidates, key=lambda pod: pod.predicate_time, default=None)
    return Selection(chosen, tuple(misses))


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
    ) -> None:
        self.resource = resource
        self.book = book
        self.pods = pods
        self.patcher = patcher
        self.assignments = assignments
        self.held = held  # the pods the kubelet lists as holding the resource are no candidates
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
                await anyio.sleep(ATTEMPT_INTERVAL)
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
