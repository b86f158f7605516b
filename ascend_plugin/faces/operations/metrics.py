"""PluginMetrics: the plugin's metrics in Prometheus' text format, rendered on demand.

prometheus_client (with the http.server and wsgiref modules it drags in) is imported at the first
scrape, by :mod:`.exposition`: an edge board nobody scrapes never pays for it.
"""

from __future__ import annotations

from ascend_plugin.faces.operations.metrics_source import CallStats, PluginSource
from ascend_plugin.faces.operations.telemetry_metrics import TelemetryText


class PluginMetrics:
    """The metrics of one plugin process; rendered in Prometheus' text format on demand."""

    def __init__(self, source: PluginSource) -> None:
        self.source = source
        self.calls = CallStats()
        self.telemetry = TelemetryText()

    def observe_call(self, function: str, seconds: float, outcome: str) -> None:
        self.calls.observe(function, seconds, outcome)

    def render(self) -> bytes:
        """The exposition text (the first call imports prometheus_client), the chips' telemetry after it."""
        from ascend_plugin.faces.operations.exposition import render

        telemetry = self.source.telemetry_of()
        text = render(self.source, self.calls)
        return text + self.telemetry.render(telemetry) if telemetry is not None else text
