"""PluginSource: the metrics' view of a running plugin, each figure read from the part that keeps it.

The chips come from discovery (none until it found them), the stuck and
abandoned driver calls from :class:`~ascend_plugin.chip_calls.ChipCalls`,
readiness from the probes (so ``ascend_plugin_ready`` says what /readyz says),
and the kubelet's counters from the face that serves it: that face is built
only once the chips are found, so the wiring hands its ``counters`` over then
(:attr:`PluginSource.kubelet`); until then they are zeros. The hot-reset
manager, where hot reset is on, is handed over the same way
(:attr:`PluginSource.hot_reset`), and so is the chips' telemetry, where it is
on (:attr:`PluginSource.telemetry_of`). The fault levels are the health
verdicts' (the fault policy's judgement), the escalations the policy's count.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence

from ascend_plugin.chip_calls import ChipCalls, StuckCall
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.faces.operations.metrics_source import ChipMetric, HotResetFigures
from ascend_plugin.faces.operations.probes import PluginProbes
from ascend_plugin.faces.operations.telemetry_view import TelemetryView
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.inventory.discovery import Discovery


class PluginSource:
    """The :class:`~.metrics_source.MetricsSource` of one plugin process."""

    def __init__(
        self,
        discovery: Discovery,
        calls: ChipCalls,
        probes: PluginProbes,
        faults: FaultPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        node: str = "",
    ) -> None:
        self.node = node or socket.gethostname()  # a kubelet's node name defaults to the host name
        self.discovery = discovery
        self.faults = faults
        self.calls = calls
        self.probes = probes
        self.clock = clock
        # The counters of the face serving the kubelet: the device plugin's, or the DRA driver's.
        self.kubelet: Callable[[], KubeletCounters] = KubeletCounters
        self.hot_reset: HotResetManager | None = None  # with hot_reset on, once the parts are built
        self.telemetry_of: Callable[[], TelemetryView | None] = _no_telemetry  # with telemetry on

    def chip_metrics(self) -> Sequence[ChipMetric]:
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

    def kubelet_counters(self) -> KubeletCounters:
        return self.kubelet()

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

    def stuck_calls(self) -> Sequence[StuckCall]:
        return self.calls.stuck_calls()

    def node_name(self) -> str:
        return self.node

    def fault_escalations(self) -> Mapping[str, int]:
        return {kind.value: count for kind, count in sorted(self.faults.escalations().items())}

    def abandoned_threads(self) -> int:
        return self.calls.abandoned_threads

    def now(self) -> float:
        return self.clock()

    def telemetry(self) -> TelemetryView | None:
        return self.telemetry_of()


def _no_telemetry() -> TelemetryView | None:
    return None
