"""The metrics in Prometheus' text format, through prometheus_client (imported at the first scrape)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ascend_plugin import __version__
from ascend_plugin.chip_calls import lane_name
from ascend_plugin.faces.operations.metrics_source import CallStats, HotResetFigures, PluginSource
from ascend_plugin.hot_reset.stats import Result


def render(source: PluginSource, calls: CallStats) -> bytes:
    """Everything the source and the call statistics say, as exposition text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(source, calls))
    return generate_latest(registry)


class _Collector(Collector):
    def __init__(self, source: PluginSource, calls: CallStats) -> None:
        self.source = source
        self.calls = calls

    def collect(self) -> Iterator[Metric]:
        source = self.source
        health = GaugeMetricFamily(
            "ascend_device_healthy", "1 when the device is Healthy for the kubelet, else 0", labels=["device"]
        )
        level = GaugeMetricFamily(
            "ascend_device_fault_level",
            "The chip's fault level, escalations included (0 NormalNPU ... 9 ManuallySeparateNPU)",
            labels=["device", "level"],
        )
        network = GaugeMetricFamily(
            "ascend_device_network_fault_level",
            "The chip's network (RoCE) fault level (0 NormalNPU ... 9 ManuallySeparateNPU)",
            labels=["device", "level"],
        )
        ai_cores = GaugeMetricFamily("ascend_device_ai_cores", "AI cores of the chip", labels=["device"])
        for chip in source.chip_metrics():
            health.add_metric([chip.device], 1.0 if chip.healthy else 0.0)
            level.add_metric([chip.device, chip.worst_level], float(chip.worst_level_value))
            if chip.network_level is not None:
                network.add_metric([chip.device, chip.network_level], float(chip.network_level_value))
            if chip.ai_cores is not None:
                ai_cores.add_metric([chip.device], chip.ai_cores)
        escalations = CounterMetricFamily(
            "ascend_fault_escalations",
            "Fault escalations since start, by upgrade_type (FaultFrequency, FaultDuration, FaultAutofill)",
            labels=["upgrade_type"],
        )
        for kind, count in source.fault_escalations().items():
            escalations.add_metric([kind], count)
        yield from (health, level, network, ai_cores, escalations)

        counters = source.kubelet()
        allocations = CounterMetricFamily("ascend_allocations", "Containers given devices by Allocate")
        errors = CounterMetricFamily("ascend_allocation_errors", "Refused Allocate calls", labels=["reason"])
        updates = CounterMetricFamily("ascend_list_and_watch_updates", "Device lists sent to the kubelet")
        registrations = CounterMetricFamily("ascend_kubelet_registrations", "Successful Register calls")
        allocations.add_metric([], counters.allocations)
        for reason, count in sorted(counters.allocation_errors.items()):
            errors.add_metric([reason], count)
        updates.add_metric([], counters.updates_sent)
        registrations.add_metric([], counters.registrations)
        ready = GaugeMetricFamily("ascend_plugin_ready", "1 when the node is served (what /readyz says)")
        ready.add_metric([], 1.0 if source.ready() else 0.0)
        # The node's name on a series of the plugin's own: a dashboard maps each scrape target to its
        # node whatever the scrape configuration labels (tests/test_telemetry_prometheus.py).
        node = GaugeMetricFamily(
            "ascend_node_info", "1, naming the node this plugin serves", labels=["node_name", "version"]
        )
        node.add_metric([source.node, __version__], 1.0)
        yield from (allocations, errors, updates, registrations, ready, node)
        # The DRA driver's claims: prepared (first time), unprepared, refused by reason.
        prepared = CounterMetricFamily("ascend_dra_claims_prepared", "ResourceClaims prepared on the node")
        unprepared = CounterMetricFamily(
            "ascend_dra_claims_unprepared", "ResourceClaims unprepared on the node"
        )
        prepare_errors = CounterMetricFamily(
            "ascend_dra_prepare_errors",
            "Claims not prepared, by reason (claim, api, device, io)",
            labels=["reason"],
        )
        prepared.add_metric([], counters.claims_prepared)
        unprepared.add_metric([], counters.claims_unprepared)
        for reason, count in sorted(counters.prepare_errors.items()):
            prepare_errors.add_metric([reason], count)
        yield from (prepared, unprepared, prepare_errors)

        stuck = GaugeMetricFamily(
            "ascend_dcmi_stuck_call_seconds",
            "Seconds a driver call has been stuck, per call lane (node-wide or a chip)",
            labels=["function", "lane"],
        )
        now = time.monotonic()
        for call in source.calls.stuck_calls():
            stuck.add_metric([call.name, lane_name(call.lane)], call.stuck_for(now))
        abandoned = GaugeMetricFamily(
            "ascend_dcmi_abandoned_threads", "Worker threads still inside driver calls that hung"
        )
        abandoned.add_metric([], float(source.calls.abandoned_threads))
        yield from (stuck, abandoned)
        yield from self._calls()
        figures = source.hot_resets()
        if figures is not None:
            yield from _hot_resets(figures)

    def _calls(self) -> Iterator[Metric]:
        stats = self.calls
        latency = HistogramMetricFamily(
            "ascend_dcmi_call_seconds", "Latency of driver calls", labels=["function"]
        )
        for function, figures in sorted(stats.latency.items()):
            cumulative = list(itertools.accumulate(figures.counts))
            bounds = [*(f"{bound:g}" for bound in stats.buckets), "+Inf"]
            latency.add_metric([function], list(zip(bounds, cumulative, strict=True)), figures.total)
        errors = CounterMetricFamily(
            "ascend_dcmi_call_errors",
            "Failed driver calls by function and DCMI code (or timeout)",
            labels=["function", "code"],
        )
        for (function, code), count in sorted(stats.errors.items()):
            errors.add_metric([function, code], count)
        yield from (latency, errors)


def _hot_resets(figures: HotResetFigures) -> Iterator[Metric]:
    """Hot resets by result and their duration; the chips waiting for their group or for an operator."""
    stats = figures.stats
    resets = CounterMetricFamily("ascend_hot_resets", "Hot resets by result", labels=["result"])
    for result in Result:
        resets.add_metric([result.value], stats.results[result])
    seconds = HistogramMetricFamily(
        "ascend_hot_reset_seconds", "Seconds from a hot reset's call until its group answered again"
    )
    bounds = [*(f"{bound:g}" for bound in stats.buckets), "+Inf"]
    seconds.add_metric(
        [], list(zip(bounds, itertools.accumulate(stats.counts), strict=True)), stats.total_seconds
    )
    yield from (resets, seconds)
    for name, documentation, devices in (
        ("waiting", "1 per device that needs a hot reset and waits for its group", figures.waiting),
        (
            "manual",
            "1 per device named in the node's ResetInfo annotation: it waits for an operator's reset",
            figures.manual,
        ),
        (
            "in_progress",
            "1 per device out for a hot reset under way (its group's, or booting after one that timed out)",
            figures.resetting,
        ),
    ):
        gauge = GaugeMetricFamily(f"ascend_hot_reset_{name}", documentation, labels=["device"])
        for device in devices:
            gauge.add_metric([device], 1.0)
        yield gauge
