"""What the metrics show of hot resets (``ascend_hot_resets_total``, ``ascend_hot_reset_seconds``)."""

from __future__ import annotations

import bisect
import collections
import enum
from dataclasses import dataclass, field
from typing import Final

# Seconds from the reset call until every chip of the group answered again.
DURATION_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0)


class Result(enum.StrEnum):
    """How a hot reset ended."""

    COMPLETE = "complete"
    FAILED = "failed"  # the driver refused the reset
    TIMEOUT = "timeout"  # a chip of the group was not back within the boot wait


@dataclass
class ResetStats:
    """Counts by result; the durations of the resets that got past the reset call, in buckets."""

    results: collections.Counter[Result] = field(default_factory=collections.Counter)
    buckets: tuple[float, ...] = DURATION_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))  # last: +Inf
    total_seconds: float = 0.0

    def record(self, result: Result, seconds: float | None) -> None:
        """One reset ended; ``seconds`` from its reset call until its end, if it got that far."""
        self.results[result] += 1
        if seconds is not None:
            self.counts[bisect.bisect_left(self.buckets, seconds)] += 1
            self.total_seconds += seconds
