"""Which pod an Allocate of n chips is for: Volcano's rules, as a pure function of the node's pods.

As Huawei's plugin infers it: among the pods waiting for exactly n chips of the
resource (Volcano's annotation names n, ``predicate-time`` not consumed, not
finished, deleted or refused by the kubelet, and here: holding nothing yet), the
one Volcano predicated first. Every other pod that asks for the resource is a
near miss with the first rule it fails, so a refusal can say why.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME, Pod
from ascend_plugin.grpc_guard.status import listed

MAX_REASONS = 5  # reasons a refusal names, most common first; the pods of the others are counted
MAX_PODS_PER_REASON = 3  # pods a refusal names for each reason; the others are counted


@dataclass(frozen=True)
class NearMiss:
    """A pod that was passed over, and why."""

    pod: str
    why: str

    def __str__(self) -> str:
        return f"{self.pod}: {self.why}"


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
    """The pod an Allocate of ``count`` chips is for, and the near misses.

    ``consumed``: this plugin served the pod (its mark may not have landed); ``holding``: pods the kubelet
    lists holding the resource. Ties go to the first by namespace/name: a function of the pods, not their
    order.
    """
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
