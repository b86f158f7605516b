"""Exponential backoff, shared by every loop that retries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delays that double from ``first`` up to ``cap`` seconds."""

    first: float
    cap: float

    def after(self, attempt: int) -> float:
        """The delay after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.first * 2.0 ** max(attempt - 1, 0), self.cap))
