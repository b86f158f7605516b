"""Backoff, retry and supervision: how every long-running part of the plugin survives failure.

A node throws everything at a device plugin: a driver that is not loaded yet,
an API server that is away, a kubelet that restarts. No single failure may end
the process, and none may turn into a tight loop or a flood of log lines. So:

* :class:`Backoff` - delays that double up to a cap, as data;
* :func:`supervise` - runs a part, logs a crash with the part's name and
  restarts it with backoff (a part that ran for a good while starts again from
  the shortest delay: backoff is for crash loops, not for rare failures);
* :class:`RootTask` and :func:`run_root_tasks` - the plugin's one list of named,
  supervised parts, started together and cancelled together.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    """Delays that double from ``first`` up to ``cap`` seconds."""

    first: float
    cap: float

    def after(self, attempt: int) -> float:
        """The delay after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.first * 2.0 ** max(attempt - 1, 0), self.cap))


PART_BACKOFF = Backoff(0.5, 30.0)
HEALTHY_RUN = 60.0  # seconds a part must run before its failures count as new

Part = Callable[[], Awaitable[None]]


async def supervise(name: str, part: Part, backoff: Backoff = PART_BACKOFF) -> None:
    """Run ``part`` until it returns; log and restart it with backoff whenever it fails."""
    attempt = 0
    while True:
        started = time.monotonic()
        try:
            await part()
            return
        except Exception:
            if time.monotonic() - started > HEALTHY_RUN:
                attempt = 0
            attempt += 1
            delay = backoff.after(attempt)
            log.exception("%s failed; restarting it in %.1f s", name, delay, extra={"part": name})
            await anyio.sleep(delay)


@dataclass(frozen=True)
class RootTask:
    """A named long-running part of the plugin."""

    name: str
    run: Part


async def run_root_tasks(tasks: Sequence[RootTask]) -> None:
    """Run every task supervised, side by side, until all return or the caller is cancelled."""
    async with anyio.create_task_group() as group:
        for task in tasks:
            group.start_soon(supervise, task.name, task.run, name=task.name)
