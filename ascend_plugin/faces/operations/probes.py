"""What /healthz and /readyz answer, decided from the parts (docs/operations.md, "The HTTP endpoint").

Liveness fails only where a restart of the pod is the one help; readiness names every cause, one line each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faces.operations.http_endpoint import Probe
from ascend_plugin.instance_lock import InstanceLock
from ascend_plugin.inventory.discovery import Discovery
from ascend_plugin.resilience import Supervision

STUCK_IS_DEAD = 300.0  # seconds a node-wide driver call may hang before only a restart helps
FAILED_IS_DEAD = 60.0  # seconds a part may fail without serving again before only a restart helps


@dataclass(frozen=True)
class ProbeLimits:
    """How long a stuck driver call or a failing part may last before the plugin counts as dead."""

    stuck_is_dead: float = STUCK_IS_DEAD
    failed_is_dead: float = FAILED_IS_DEAD


LIMITS = ProbeLimits()


class PluginProbes:
    """Liveness and readiness of one plugin process, read from its parts whenever a probe asks."""

    def __init__(
        self,
        *,
        lock: InstanceLock,
        discovery: Discovery,
        calls: ChipCalls,
        supervision: Supervision,
        kubelet_part: str,
        limits: ProbeLimits = LIMITS,
        notes: Callable[[], list[str]] | None = None,
        resets: Callable[[], list[str]] | None = None,
    ) -> None:
        """``kubelet_part``: the root task through which the kubelet is served ("device plugin", ...);
        ``notes``: what a node that is served lacks of what the settings ask (said in the ready detail);
        ``resets``: the hot resets under way, one line each (said in the detail, ready or not)."""
        self.resets = resets
        self.lock = lock
        self.discovery = discovery
        self.calls = calls
        self.supervision = supervision
        self.kubelet_part = kubelet_part
        self.limits = limits
        self.notes = notes

    def liveness(self) -> Probe:
        """Alive unless a node-wide call is stuck, or a part has failed, for longer than the limits."""
        now = time.monotonic()
        stuck = self.calls.stuck(None)
        if stuck is not None and stuck.stuck_for(now) > self.limits.stuck_is_dead:
            return Probe(False, stuck.describe(now))
        if restart := self.discovery.restart_needed:
            return Probe(False, restart)
        for part in self.supervision.parts():
            if part.failing_for(now) > self.limits.failed_is_dead:
                return Probe(
                    False,
                    f"{part.name} has failed for {part.failing_for(now):.0f} s without serving again: "
                    f"{part.last_error}",
                )
        return Probe(True, "ok")

    def readiness(self) -> Probe:
        """Ready when the node is served; otherwise every cause, one line each."""
        now = time.monotonic()
        lock = self.lock
        if not lock.held and (lock.waiting_since is not None or lock.problem):
            return Probe(False, lock.status())
        node = self.discovery.node
        if node is None:
            return Probe(False, f"chips not available: {self.discovery.problem}")
        problems = []
        if (stuck := self.calls.stuck(None)) is not None:
            problems.append(stuck.describe(now))
        parts = self.supervision.parts()
        for part in parts:  # its failure while it waits to restart, else what it says
            if not part.running:
                restart = max((part.restart_at or now) - now, 0.0)
                problems.append(f"{part.name} failed: {part.last_error}; restarting it in {restart:.1f} s")
            elif part.problems is not None:
                problems.extend(f"{part.name}: {problem}" for problem in part.problems())
        if not any(part.name == self.kubelet_part for part in parts):
            problems.append(f"{self.kubelet_part}: not started yet")
        also = self.discovery.unserved() + (self.resets() if self.resets is not None else [])
        if problems:
            return Probe(False, "\n".join([*problems, *also]))
        chips = node.inventory.chips()
        healthy = sum(1 for state in chips if state.healthy)
        detail = f"ready: {healthy} of {len(chips)} chips healthy"
        stuck_chips = [call.describe(now) for call in self.calls.stuck_calls() if call.lane is not None]
        if stuck_chips:
            detail += "; " + "; ".join(stuck_chips)
        if also:
            detail += "; " + "; ".join(also)
        if self.notes is not None and (notes := self.notes()):
            detail += "; " + "; ".join(notes)
        return Probe(True, detail)
