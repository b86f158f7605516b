"""Kubernetes Events on the Node: each chip's health transition, start-up notices, escalation releases and
hot reset stages, all through one queue.

Transitions pass a token bucket (a burst of 10, then one per 10 s), the rest are counted and summed up in
one Event; the queue is bounded and waits out an absent API server. docs/kubernetes.md, "Node Events".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.fault_policy.escalations import Release
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubeapi.client import EVENTS, NODES, JsonObject, Kube, mapping_field, string_field
from ascend_plugin.kubeapi.errors import ApiError, KubeError
from ascend_plugin.kubeapi.retry import Retrier
from backends.families import FamilyTable

log = logging.getLogger(__name__)

COMPONENT = "ascend-device-plugin"
MAX_MESSAGE = 1024
QUEUE_LIMIT = 100
_REJECTED = (400, 422)  # a malformed Event: retrying cannot help


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second."""

    def __init__(
        self, burst: int = 10, rate: float = 0.1, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.rate = rate
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def take(self) -> bool:
        """Take a token if there is one."""
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def wait_time(self) -> float:
        """Seconds until a token is free (0 if one is)."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self.rate)


@dataclass(frozen=True)
class PendingEvent:
    """An Event to post: reason, type, message and when it happened."""

    reason: str
    type: str
    message: str
    at: datetime


def transition_event(name: str, old: ChipState, new: ChipState, at: datetime) -> PendingEvent:
    """The Event for chip ``name`` whose health flipped from ``old`` to ``new``."""
    if new.healthy:
        was = f" (was: {old.reason})" if old.reason else ""
        faults = f"; remaining faults: {_faults(new)}" if new.health.faults else ""
        return PendingEvent("NPUHealthy", "Normal", f"{name} is healthy again{was}{faults}", at)
    faults = f"; faults: {_faults(new)}" if new.health.faults else ""
    return PendingEvent(
        "NPUUnhealthy", "Warning", f"{name} is unhealthy: {new.reason or 'unknown reason'}{faults}", at
    )


RELEASE_REASON = "NPUEscalationReleased"


def release_event(chip: str, release: Release) -> tuple[str, str]:
    """The reason and message of the Event for escalations lifted from ``chip`` (its device name)."""
    lifted = "; ".join(
        f"{reason.fault_code if reason.code is None else reason.fault_code.upper()} at {reason.level.name} "
        f"by {reason.kind.value} since "
        f"{datetime.fromtimestamp(reason.upgrade_time / 1000, UTC):%Y-%m-%dT%H:%M:%SZ}"
        for reason in release.reasons
    )
    manual = any(reason.level is FaultLevel.ManuallySeparateNPU for reason in release.reasons)
    what = "no longer manually separated" if manual else "escalation lifted"
    return RELEASE_REASON, f"{chip} {what} ({release.cause.value}): {lifted}"


def _faults(state: ChipState) -> str:
    health = state.health
    return ", ".join(
        f"{code} ({fault.level.name})" for code, fault in zip(health.codes, health.faults, strict=True)
    )


class NodeEvents:
    """Turns inventory transitions into rate-limited Events on the Node."""

    def __init__(
        self,
        kube: Kube,
        node_name: str,
        table: FamilyTable,
        namespace: str,
        bucket: TokenBucket | None = None,
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.table = table
        self.bucket = bucket or TokenBucket()
        self.namespace = namespace
        self.dropped = 0  # transitions not posted since the last summary
        self._queue: deque[PendingEvent] = deque()
        self._wake = Changes()  # bumped when an Event is queued or dropped
        self._node_uid: str | None = None

    def on_transition(self, old: ChipState, new: ChipState) -> None:
        """Inventory listener (runs on the event loop, must not block): queue or count the Event."""
        if len(self._queue) < QUEUE_LIMIT and self.bucket.take():
            event = transition_event(self.table.chip_id(new.phy_id), old, new, datetime.now(UTC))
            self._queue.append(event)
        else:
            self.dropped += 1
        self._wake.bump()

    def announce(self, reason: str, message: str, kind: str = "Warning") -> None:
        """Queue a one-off Event (a start-up warning, a hot reset's stage), outside the token bucket."""
        if len(self._queue) < QUEUE_LIMIT:
            self._queue.append(PendingEvent(reason, kind, message, datetime.now(UTC)))
            self._wake.bump()

    async def serve(self, inventory: Inventory, policy: FaultPolicy | None) -> None:
        """Post the node's Events until cancelled: transitions, the policy's releases, and what others
        :meth:`announce` (start-up notices, hot reset stages), all through the one queue."""
        stop_listening = inventory.on_transition(self.on_transition)
        try:
            async with anyio.create_task_group() as tasks:
                if policy is not None:
                    tasks.start_soon(self.follow_releases, policy, inventory, name="escalation releases")
                await self.run()
        finally:
            stop_listening()

    async def follow_releases(self, policy: FaultPolicy, inventory: Inventory) -> None:
        """Post each escalation the policy lifts, looked for at each change of the inventory (a lift changes
        a chip's judgement)."""
        seen = inventory.version
        while not inventory.closed:
            for release in policy.drain_releases():
                self.announce(*release_event(self.table.chip_id(release.phy_id), release), kind="Normal")
            seen = await inventory.wait_for_change(seen)

    async def run(self) -> None:
        """Post queued Events forever, and a summary of dropped ones when a token frees up."""
        retry = Retrier(f"node events for {self.node_name}")
        while True:
            woken = self._wake.version
            if self._queue:
                event = self._queue[0]
            elif self.dropped:
                delay = self.bucket.wait_time()
                if delay > 0 or not self.bucket.take():
                    await anyio.sleep(delay)
                    continue
                event = self._summary()
                self._queue.append(event)
            else:
                await self._wake.wait_for_change(woken)
                continue
            try:
                await self._post(event)
            except ApiError as error:
                if error.status not in _REJECTED:
                    await retry.failed(error)
                    continue
                # The API server will never take this one; do not let it hold up the rest.
                log.error(
                    "node event dropped, the API server rejects it: %s", error, extra={"reason": event.reason}
                )
            except KubeError as error:
                await retry.failed(error)
                continue
            else:
                retry.succeeded()
            self._queue.popleft()

    def _summary(self) -> PendingEvent:
        count, self.dropped = self.dropped, 0
        message = (
            f"{count} NPU health event(s) were not posted: more than {self.bucket.burst} in a burst "
            f"(then one per {1 / self.bucket.rate:g} s); the plugin's log has every transition"
        )
        log.warning("node events: %s", message, extra={"dropped": count})
        return PendingEvent("NPUEventsDropped", "Warning", message, datetime.now(UTC))

    async def _post(self, event: PendingEvent) -> None:
        stamp = event.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        involved: JsonObject = {"apiVersion": "v1", "kind": "Node", "name": self.node_name}
        uid = await self._uid()
        if uid:
            involved["uid"] = uid
        body: JsonObject = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{self.node_name}.", "namespace": self.namespace},
            "involvedObject": involved,
            "reason": event.reason,
            "type": event.type,
            "message": event.message[:MAX_MESSAGE],
            "source": {"component": COMPONENT, "host": self.node_name},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.node_name,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        await self.kube.create(EVENTS, self.namespace, body)
        log.debug("node event posted: %s %s", event.reason, event.message)

    async def _uid(self) -> str | None:
        """The Node's uid (kubectl matches Events by it); None while it cannot be read."""
        if self._node_uid is None:
            try:
                node = await self.kube.get(NODES, self.node_name)
            except KubeError as error:
                log.debug("node events: the node's uid is unknown (%s); posting without it", error)
                return None
            self._node_uid = string_field(mapping_field(node, "metadata"), "uid") or None
        return self._node_uid
