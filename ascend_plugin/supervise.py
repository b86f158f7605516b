"""Supervision: keep a long-running part of the plugin alive."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from ascend_plugin.backoff import Backoff

log = logging.getLogger(__name__)

PART_BACKOFF = Backoff(0.5, 30.0)
HEALTHY_RUN = 60.0  # seconds a part must run before its failures count as new


async def supervise(name: str, part: Callable[[], Awaitable[None]], backoff: Backoff = PART_BACKOFF) -> None:
    """Run ``part`` until it returns; log and restart it with backoff whenever it fails.

    A part that ran for a good while before failing starts again from the
    shortest delay: the backoff is for crash loops, not for rare failures.
    """
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
