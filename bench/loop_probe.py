"""The plugin's own command with an event-loop lag probe in its loop (for bench/loop_stall.py only).

Run: ``python bench/loop_probe.py PROBE_FILE run --backend fake ...``. Every
event loop the process creates gets one more task: it sleeps 1 ms in a loop
and appends ``<unix time> <ms late> <ms of CPU>`` to PROBE_FILE whenever it
woke more than 1 ms late, i.e. whenever something held the loop. The CPU
figure is what the loop's thread itself used meanwhile: a stall the plugin
caused shows it close to the lateness, one where a noisy machine did not
schedule the process shows little. Garbage collections of the loop's thread
that take over 1 ms are appended as ``gc <unix time> <generation> <ms>``, so a
stall can be told apart as the collector's. The plugin itself is not changed in
any way.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from typing import Any, TextIO

from ascend_plugin.cli import main

PERIOD = 0.001
REPORTED = 0.001  # lateness worth a line


async def _probe(path: str) -> None:
    # A line buffered local file: writing one line is far below what the probe measures.
    with open(path, "a", buffering=1, encoding="utf-8") as out:  # noqa: ASYNC230
        timer = _CollectionTimer(out)
        gc.callbacks.append(timer)
        try:
            while True:
                start, cpu = time.perf_counter(), time.thread_time()
                await asyncio.sleep(PERIOD)
                late = time.perf_counter() - start - PERIOD
                if late > REPORTED:
                    used = time.thread_time() - cpu
                    out.write(f"{time.time():.6f} {late * 1000:.3f} {used * 1000:.3f}\n")
        finally:
            gc.callbacks.remove(timer)  # before the file closes: a later collection has nowhere to write


class _CollectionTimer:
    """A ``gc.callbacks`` entry that writes every collection over 1 ms on the loop's thread."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.thread = threading.get_ident()
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self.thread:
            return
        if phase == "start":
            self.started = time.perf_counter()
            return
        took = time.perf_counter() - self.started
        if took > REPORTED:
            self.out.write(f"gc {time.time():.6f} {info['generation']} {took * 1000:.3f}\n")


class _ProbedLoops(asyncio.DefaultEventLoopPolicy):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.call_soon(lambda: loop.create_task(_probe(self.path), name="loop-lag probe"))
        return loop


if __name__ == "__main__":
    asyncio.set_event_loop_policy(_ProbedLoops(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
