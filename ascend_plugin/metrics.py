"""Prometheus metrics of one plugin process.

State (device health, fault levels, AI cores, counters the parts keep anyway)
is read at scrape time by a collector, so no part updates a gauge on its hot
path. Only timings are observed as they happen: the latency of every driver
call and the duration of every health round.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ascend_plugin.app import PluginApp

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StateCollector(Collector):
    """Reads the app's state when Prometheus scrapes."""

    def __init__(self, app: PluginApp) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        app = self.app
        health = GaugeMetricFamily(
            "ascend_device_healthy", "1 when the device is Healthy for the kubelet, else 0", labels=["device"]
        )
        level = GaugeMetricFamily(
            "ascend_device_fault_level",
            "Worst current fault level (0 NormalNPU ... 9 ManuallySeparateNPU)",
            labels=["device", "level"],
        )
        ai_cores = GaugeMetricFamily("ascend_device_ai_cores", "AI cores of the chip", labels=["device"])
        if app.registry is not None and app.node is not None:
            for device in app.registry.devices():
                health.add_metric([device.id], 1.0 if device.healthy else 0.0)
                level.add_metric([device.id, device.worst_level.name], float(device.worst_level))
                if (cores := app.node.ai_cores.get(device.chip.phy_id)) is not None:
                    ai_cores.add_metric([device.id], cores)
        yield from (health, level, ai_cores)

        service, registrar = app.service, app.registrar
        allocations = CounterMetricFamily("ascend_allocations", "Containers given devices by Allocate")
        errors = CounterMetricFamily("ascend_allocation_errors", "Refused Allocate calls", labels=["reason"])
        updates = CounterMetricFamily("ascend_list_and_watch_updates", "Device lists sent to the kubelet")
        registrations = CounterMetricFamily("ascend_kubelet_registrations", "Successful Register calls")
        if service is not None:
            allocations.add_metric([], service.allocations)
            for reason, count in sorted(service.allocation_errors.items()):
                errors.add_metric([reason], count)
            updates.add_metric([], service.updates_sent)
        registrations.add_metric([], registrar.registrations if registrar is not None else 0)
        ready = GaugeMetricFamily("ascend_plugin_ready", "1 when registered and the driver answers")
        ready.add_metric([], 1.0 if app.ready else 0.0)
        yield from (allocations, errors, updates, registrations, ready)


class PluginMetrics:
    """The metrics registry of one PluginApp."""

    def __init__(self, app: PluginApp) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(app))
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
        self.round_seconds = Histogram(
            "ascend_health_round_seconds",
            "Duration of one health round over every chip",
            buckets=_CALL_BUCKETS,
            registry=self.registry,
        )

    def observe_call(self, function: str, seconds: float, outcome: str) -> None:
        """ChipCaller observer: latency always, errors by code."""
        self.call_seconds.labels(function).observe(seconds)
        if outcome != "ok":
            self.call_errors.labels(function, outcome).inc()

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)
