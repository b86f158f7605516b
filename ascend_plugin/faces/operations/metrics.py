"""Prometheus metrics of one plugin process.

State (device health, fault levels, AI cores, counters the parts keep anyway)
is read at scrape time by a collector, so no part updates a gauge on its hot
path. Only timings are observed as they happen: the latency of every driver
call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ascend_plugin.chip_calls import StuckCall, lane_name

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class ChipMetric:
    """One chip as the metrics show it, labelled by its whole-chip device ID."""

    device: str
    healthy: bool
    worst_level: str
    worst_level_value: int
    ai_cores: float | None


@dataclass(frozen=True)
class KubeletCounters:
    """What the kubelet-facing face has counted (the device plugin's, or the DRA driver's claims)."""

    allocations: int = 0
    allocation_errors: Mapping[str, int] = field(default_factory=dict)
    updates_sent: int = 0
    registrations: int = 0
    claims_prepared: int = 0
    claims_unprepared: int = 0
    prepare_errors: Mapping[str, int] = field(default_factory=dict)


class MetricsSource(Protocol):
    """What the metrics read at scrape time; the app provides it."""

    def chip_metrics(self) -> Sequence[ChipMetric]: ...

    def kubelet_counters(self) -> KubeletCounters: ...

    def ready(self) -> bool: ...

    def stuck_calls(self) -> Sequence[StuckCall]: ...

    def abandoned_threads(self) -> int: ...

    def now(self) -> float: ...


class _StateCollector(Collector):
    """Reads the plugin's state when Prometheus scrapes."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        source = self.source
        health = GaugeMetricFamily(
            "ascend_device_healthy", "1 when the device is Healthy for the kubelet, else 0", labels=["device"]
        )
        level = GaugeMetricFamily(
            "ascend_device_fault_level",
            "Worst current fault level (0 NormalNPU ... 9 ManuallySeparateNPU)",
            labels=["device", "level"],
        )
        ai_cores = GaugeMetricFamily("ascend_device_ai_cores", "AI cores of the chip", labels=["device"])
        for chip in source.chip_metrics():
            health.add_metric([chip.device], 1.0 if chip.healthy else 0.0)
            level.add_metric([chip.device, chip.worst_level], float(chip.worst_level_value))
            if chip.ai_cores is not None:
                ai_cores.add_metric([chip.device], chip.ai_cores)
        yield from (health, level, ai_cores)

        counters = source.kubelet_counters()
        allocations = CounterMetricFamily("ascend_allocations", "Containers given devices by Allocate")
        errors = CounterMetricFamily("ascend_allocation_errors", "Refused Allocate calls", labels=["reason"])
        updates = CounterMetricFamily("ascend_list_and_watch_updates", "Device lists sent to the kubelet")
        registrations = CounterMetricFamily("ascend_kubelet_registrations", "Successful Register calls")
        allocations.add_metric([], counters.allocations)
        for reason, count in sorted(counters.allocation_errors.items()):
            errors.add_metric([reason], count)
        updates.add_metric([], counters.updates_sent)
        registrations.add_metric([], counters.registrations)
        ready = GaugeMetricFamily("ascend_plugin_ready", "1 when registered and the driver answers")
        ready.add_metric([], 1.0 if source.ready() else 0.0)
        yield from (allocations, errors, updates, registrations, ready)
        yield from _dra_counters(counters)

        stuck = GaugeMetricFamily(
            "ascend_dcmi_stuck_call_seconds",
            "Seconds a driver call has been stuck, per call lane (node-wide or a chip)",
            labels=["function", "lane"],
        )
        now = source.now()
        for call in source.stuck_calls():
            stuck.add_metric([call.name, lane_name(call.lane)], call.stuck_for(now))
        abandoned = GaugeMetricFamily(
            "ascend_dcmi_abandoned_threads", "Worker threads still inside driver calls that hung"
        )
        abandoned.add_metric([], float(source.abandoned_threads()))
        yield from (stuck, abandoned)


def _dra_counters(counters: KubeletCounters) -> Iterator[Metric]:
    """The DRA driver's claims: prepared (first time), unprepared, refused by reason."""
    prepared = CounterMetricFamily("ascend_dra_claims_prepared", "ResourceClaims prepared on the node")
    unprepared = CounterMetricFamily("ascend_dra_claims_unprepared", "ResourceClaims unprepared on the node")
    errors = CounterMetricFamily(
        "ascend_dra_prepare_errors",
        "Claims not prepared, by reason (claim, api, device, io)",
        labels=["reason"],
    )
    prepared.add_metric([], counters.claims_prepared)
    unprepared.add_metric([], counters.claims_unprepared)
    for reason, count in sorted(counters.prepare_errors.items()):
        errors.add_metric([reason], count)
    yield from (prepared, unprepared, errors)


class PluginMetrics:
    """The metrics registry of one plugin process."""

    def __init__(self, source: MetricsSource) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(source))
        self.call_seconds = Histogram(
            "ascend_dcmi_call_seconds",
            "Latency of driver calls",
            ["function"],
            buckets=_CALL_BUCKETS,
            registry=self.registry,
        )
        self.call_errors = Counter(
            "ascend_dcmi_call_errors",
            "Failed driver calls by function and DCMI code (or timeout)",
            ["function", "code"],
            registry=self.registry,
        )

    def observe_call(self, function: str, seconds: float, outcome: str) -> None:
        """ChipCalls observer: latency always, errors by code."""
        self.call_seconds.labels(function).observe(seconds)
        if outcome != "ok":
            self.call_errors.labels(function, outcome).inc()

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)
