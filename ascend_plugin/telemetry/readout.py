"""One chip's telemetry as the rounds left it, each figure with the time it was read.

A figure is shown while read within :data:`STALE_ROUNDS` of its interval, then leaves /metrics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from backends.backend import MemoryUsage, Utilization
from backends.library import EccInfo, VdevActivity

STALE_ROUNDS: Final = 3  # a figure older than this many of its intervals is not shown

# What the rounds read, by how often: the chip figures and the slower groups (the VDIE id is read once).
FAST: Final = ("health", "temperature", "power", "voltage", "aicore_frequency", "utilization", "vnpus")
SLOW: Final = ("memory", "network", "ecc")
# npu-exporter shows the first ten: error_code, error_code_1 .. _9 (the collector keeps no more, the
# metrics write no more series)
MAX_ERROR_CODES: Final = 10


@dataclass(frozen=True)
class HealthFigures:
    """``dcmi_get_device_health`` and the chip's fault codes, as npu-exporter shows them."""

    status: int  # 1 healthy (0), 0 not (an alarm, or the card dropped), -1 the call failed
    codes: tuple[int, ...] = ()  # the first MAX_ERROR_CODES current fault codes
    dropped: bool = False  # off the bus (-8012, 0xFFFFFFFF): npu-exporter counts its health unknown


@dataclass(frozen=True)
class Readout:
    """What is known of one chip's telemetry; ``read_at`` holds each figure's time (time.monotonic())."""

    health: HealthFigures | None = None
    temperature: int | None = None
    power: float | None = None
    voltage: float | None = None
    aicore_frequency: int | None = None
    utilization: Utilization | None = None
    vnpus: tuple[VdevActivity, ...] = ()
    memory: MemoryUsage | None = None
    network: int | None = None
    ecc: EccInfo | None = None
    vdie_id: str = ""
    read_at: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def updated(self, figures: Mapping[str, object], at: float) -> Readout:
        """This readout with ``figures`` (name -> value) read at ``at``."""
        times = {**self.read_at, **dict.fromkeys(figures, at)}
        return dataclasses.replace(self, **figures, read_at=MappingProxyType(times))  # type: ignore[arg-type]

    def fresh(self, now: float, intervals: Mapping[str, float]) -> Readout:
        """Only the figures read within STALE_ROUNDS of their interval (``intervals``: name -> seconds)."""
        stale = {
            name: _EMPTY[name]
            for name, at in self.read_at.items()
            if name in intervals and now - at > STALE_ROUNDS * intervals[name]
        }
        missing = {name: _EMPTY[name] for name in _EMPTY if name not in self.read_at}
        gone = {**missing, **stale}
        return dataclasses.replace(self, **gone) if gone else self  # type: ignore[arg-type]


_EMPTY: Final[Mapping[str, object]] = MappingProxyType(
    {
        item.name: getattr(Readout(), item.name)
        for item in dataclasses.fields(Readout)
        if item.name != "read_at"
    }
)
