"""Every chip-library call runs here: one worker thread, one call at a time, each with a timeout.

DCMI is not thread-safe and its calls can block for seconds, or forever when a
card wedges. Running them on one dedicated thread keeps the event loop (and so
the kubelet path) free. A call that overruns its timeout opens the circuit:
it is recorded as stuck, later calls fail at once instead of queuing behind it,
and the circuit closes by itself when the stuck call finally returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


CallObserver = Callable[[str, float, str], None]


@dataclass(frozen=True)
class StuckCall:
    """A call that overran its timeout and has not returned yet."""

    name: str
    concerns: tuple[str, ...]  # device IDs the call was about; empty = the whole node
    since: float  # time.monotonic() when it started


class ChipCallError(Exception):
    """Base for calls that did not run to completion."""


class ChipCallTimeout(ChipCallError):
    """The call overran its timeout; it keeps running in the worker thread."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        super().__init__(f"driver call {name} did not return within {timeout:g} s")


class ChipCallsBlocked(ChipCallError):
    """A previous call is stuck, so no new call is queued behind it."""

    def __init__(self, stuck: StuckCall) -> None:
        self.stuck = stuck
        super().__init__(f"driver call {stuck.name} is stuck; not queuing more calls behind it")


class _WorkerThread:
    """One daemon thread running submitted calls in order.

    Not a ThreadPoolExecutor: its threads are joined at interpreter exit, so a
    driver call that never returns would keep the process from exiting.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[concurrent.futures.Future[object], Callable[[], object]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="dcmi-calls", daemon=True)
        self._thread.start()

    def submit(self, function: Callable[[], T]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((future, function))  # type: ignore[arg-type]
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, function = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function())
            except BaseException as error:  # handed to the awaiting coroutine
                future.set_exception(error)


class ChipCaller:
    """Runs blocking library calls on one worker thread with a per-call timeout."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._worker = _WorkerThread()
        self._lock = asyncio.Lock()
        self._stuck: StuckCall | None = None
        self._listeners: list[Callable[[StuckCall | None], None]] = []
        self._observers: list[CallObserver] = []

    @property
    def stuck(self) -> StuckCall | None:
        """The call currently overrunning, if any."""
        return self._stuck

    def on_circuit_change(self, listener: Callable[[StuckCall | None], None]) -> None:
        """Call ``listener(stuck)`` when a call gets stuck and ``listener(None)`` when it returns."""
        self._listeners.append(listener)

    def on_call_done(self, observer: CallObserver) -> None:
        """Call ``observer(name, seconds, outcome)`` after every call (for metrics).

        ``outcome`` is "ok", the DCMI code of a failed call, "timeout", or the
        exception's class name.
        """
        self._observers.append(observer)

    async def call(
        self,
        name: str,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``function`` on the worker thread; see the module docstring for failures.

        Pass ``concerns=("Ascend310-0",)`` through :meth:`call_for` to say which
        devices a hang should mark unhealthy.
        """
        return await self.call_for((), name, function, *args, **kwargs)

    async def call_for(
        self,
        concerns: tuple[str, ...],
        name: str,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Like :meth:`call`, naming the devices the call is about."""
        async with self._lock:
            if self._stuck is not None:
                raise ChipCallsBlocked(self._stuck)
            loop = asyncio.get_running_loop()
            started = time.monotonic()
            future = self._worker.submit(lambda: function(*args, **kwargs))
            wrapped = asyncio.wrap_future(future, loop=loop)
            outcome = "ok"
            try:
                return await asyncio.wait_for(asyncio.shield(wrapped), self.timeout)
            except TimeoutError:
                outcome = "timeout"
                stuck = StuckCall(name, concerns, started)
                self._stuck = stuck
                log.error(
                    "driver call %s did not return within %g s; its chips are marked unhealthy "
                    "and no further calls are made until it returns",
                    name,
                    self.timeout,
                    extra={"call": name, "devices": list(concerns)},
                )
                future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._returned, stuck))
                self._notify(stuck)
                raise ChipCallTimeout(name, self.timeout) from None
            except Exception as error:
                code = getattr(error, "code", None)
                outcome = str(code) if isinstance(code, int) else type(error).__name__
                raise
            finally:
                elapsed = time.monotonic() - started
                for observer in self._observers:
                    observer(name, elapsed, outcome)

    def _returned(self, stuck: StuckCall) -> None:
        if self._stuck is stuck:
            self._stuck = None
            log.warning(
                "stuck driver call %s returned after %.1f s; calls resume",
                stuck.name,
                time.monotonic() - stuck.since,
                extra={"call": stuck.name},
            )
            self._notify(None)

    def _notify(self, stuck: StuckCall | None) -> None:
        for listener in self._listeners:
            listener(stuck)

    def shutdown(self) -> None:
        """Let the worker thread end after its current call; a stuck call is abandoned."""
        self._worker.stop()
