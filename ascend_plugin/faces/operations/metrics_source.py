"""What the metrics are made of: each figure read at scrape time from the part that keeps it, so no part
updates a gauge on its hot path; only driver calls are counted (:class:`CallStats`). docs/operations.md.
"""

from __future__ import annotations

import bisect
import collections
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.faces.operations.probes import PluginProbes
from ascend_plugin.faces.operations.telemetry_metrics import TelemetryView
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.hot_reset.stats import ResetStats
from ascend_plugin.inventory.discovery import Discovery

CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class ChipMetric:
    """One chip as the metrics show it, labelled by its whole-chip device ID."""

    device: str
    healthy: bool
    worst_level: str
    worst_level_value: int
    ai_cores: float | None
    network_level: str | None = None  # the fault policy's network level; None before the chip is judged
    network_level_value: int = 0


@dataclass(frozen=True)
class HotResetFigures:
    """Hot reset for the metrics: the resets so far; the chips waiting for their group or an operator."""

    stats: ResetStats
    waiting: tuple[str, ...] = ()  # devices that need a reset, waiting for their reset group to be free
    manual: tuple[str, ...] = ()  # devices named in the ResetInfo annotation, waiting for an operator
    resetting: tuple[str, ...] = ()  # devices out for a reset under way (or still booting after one)


@dataclass
class Latency:
    """One function's call latencies: a count per bucket (the last is +Inf), their sum and number."""

    counts: list[int]
    total: float = 0.0
    calls: int = 0


class CallStats:
    """Latency and failures of driver calls, by function (and DCMI code, or timeout)."""

    def __init__(self, buckets: Sequence[float] = CALL_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self.latency: dict[str, Latency] = {}
        self.errors: collections.Counter[tuple[str, str]] = collections.Counter()

    def observe(self, function: str, seconds: float, outcome: str) -> None:
        """ChipCalls observer: latency always, errors by code."""
        latency = self.latency.get(function)
        if latency is None:
            latency = self.latency[function] = Latency([0] * (len(self.buckets) + 1))
        latency.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        latency.total += seconds
        latency.calls += 1
        if outcome != "ok":
            self.errors[function, outcome] += 1


class PluginSource:
    """The metrics' view of one plugin process; the parts built once the chips are found hand over their
    ``counters`` (:attr:`kubelet`), hot-reset manager and telemetry then."""

    def __init__(
        self,
        discovery: Discovery,
        calls: ChipCalls,
        probes: PluginProbes,
        faults: FaultPolicy,
        *,
        node: str = "",
    ) -> None:
        self.node = node or socket.gethostname()  # a kubelet's node name defaults to the host name
        self.discovery = discovery
        self.faults = faults
        self.calls = calls
        self.probes = probes
        # The counters of the face serving the kubelet: the device plugin's, or the DRA driver's.
        self.kubelet: Callable[[], KubeletCounters] = KubeletCounters
        self.hot_reset: HotResetManager | None = None  # with hot_reset on, once the parts are built
        self.telemetry_of: Callable[[], TelemetryView | None] = lambda: None  # with telemetry on

    def chip_metrics(self) -> Sequence[ChipMetric]:
        """Every chip discovery found, with the health verdict's fault levels."""
        node = self.discovery.node
        if node is None:
            return []
        inventory = node.inventory
        metrics = []
        for state in inventory.chips():
            judgement = state.health.judgement
            network = judgement.network_level if judgement is not None else None
            metrics.append(
                ChipMetric(
                    inventory.table.chip_id(state.phy_id),
                    state.healthy,
                    state.health.worst_level.name,
                    int(state.health.worst_level),
                    state.ai_cores,
                    network.name if network is not None else None,
                    int(network) if network is not None else 0,
                )
            )
        return metrics

    def ready(self) -> bool:
        return self.probes.readiness().ok

    def hot_resets(self) -> HotResetFigures | None:
        manager, node = self.hot_reset, self.discovery.node
        if manager is None or node is None:
            return None
        table = node.inventory.table
        return HotResetFigures(
            manager.stats,
            tuple(table.chip_id(phy) for phy in sorted(manager.waiting)),
            tuple(table.chip_id(entry.chip.phy_id) for entry in manager.manual.entries()),
            tuple(table.chip_id(phy) for phy in sorted(manager.resetting())),
        )

    def fault_escalations(self) -> Mapping[str, int]:
        """Escalations the fault policy recorded since start, by ``upgrade_type``."""
        return {kind.value: count for kind, count in sorted(self.faults.escalations().items())}
