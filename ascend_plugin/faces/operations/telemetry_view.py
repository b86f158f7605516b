"""What the telemetry metrics read at scrape time: the chips' fresh figures and who holds each chip.

Kept apart from :mod:`.telemetry_metrics` so the metrics source can name it
without importing prometheus_client, which waits for the first scrape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ascend_plugin.holdings.held import ContainerChips
from ascend_plugin.holdings.pod_resources import ContainerRef
from ascend_plugin.telemetry.collector import ChipSample


@dataclass(frozen=True)
class TelemetryView:
    """One scrape's telemetry: every chip's sample and the containers holding chips of the node."""

    chips: Sequence[ChipSample]
    containers: Sequence[ContainerChips] = ()
    cards: int | None = None  # the node's DCMI cards, where the family shows them (machine_card_nums)

    def health_counts(self) -> tuple[int, int, int]:
        """npu-exporter's (healthy, unhealthy, unknown) chips, which add up to ``machine_npu_nums``.

        Healthy: the health call answered 0; unhealthy: any other answer (a
        minor alarm too); unknown: the call failed, the card dropped off the
        bus, or the chip has not been read yet.
        """
        healthy = unhealthy = 0
        for sample in self.chips:
            health = sample.readout.health
            if health is None or health.status == -1 or health.dropped:
                continue
            healthy += health.status == 1
            unhealthy += health.status == 0
        return healthy, unhealthy, len(self.chips) - healthy - unhealthy

    def holders(self, phy_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding the chip (whole, a share of it, or a vNPU of it), sorted."""
        return tuple(sorted(held.ref for held in self.containers if phy_id in held.chips))

    def vnpu_holders(self, phy_id: int, vdev_id: int) -> tuple[ContainerRef, ...]:
        """The containers holding vNPU ``vdev_id`` of the chip."""
        return tuple(
            sorted(
                held.ref
                for held in self.containers
                if any(device.vnpu == vdev_id and phy_id in device.chips for device in held.devices)
            )
        )
