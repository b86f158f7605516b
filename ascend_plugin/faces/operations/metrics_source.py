"""What the metrics are made of: the state read at scrape time, and the driver calls counted as they happen.

State (device health, fault levels, AI cores, counters the parts keep anyway)
is read at scrape time through :class:`MetricsSource`, so no part updates a
gauge on its hot path. Only driver calls are counted as they happen, into
:class:`CallStats`: plain numbers, a histogram's buckets and error counts.
prometheus_client itself (with the http.server and wsgiref modules it drags
in) is imported at the first scrape (:mod:`.exposition`), not at start: an edge
board nobody scrapes never pays for it.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ascend_plugin.chip_calls import StuckCall
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.faces.operations.telemetry_view import TelemetryView
from ascend_plugin.hot_reset.stats import ResetStats

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


class MetricsSource(Protocol):
    """What the metrics read at scrape time; :class:`~.plugin_source.PluginSource` reads it from the parts."""

    def chip_metrics(self) -> Sequence[ChipMetric]: ...

    def node_name(self) -> str:
        """The node this plugin serves: ``ascend_node_info``'s label, which any scrape carries."""
        ...

    def kubelet_counters(self) -> KubeletCounters: ...

    def ready(self) -> bool: ...

    def hot_resets(self) -> HotResetFigures | None: ...

    def stuck_calls(self) -> Sequence[StuckCall]: ...

    def fault_escalations(self) -> Mapping[str, int]:
        """Escalations the fault policy recorded since start, by ``upgrade_type``."""
        ...

    def abandoned_threads(self) -> int: ...

    def now(self) -> float: ...

    def telemetry(self) -> TelemetryView | None:
        """The chips' telemetry for this scrape; None when it is off (or the chips are not found yet)."""
        ...


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
