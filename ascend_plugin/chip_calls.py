"""Every chip-library call runs here: one worker thread per lane, every call with a timeout.

DCMI calls block, for seconds or forever when a card wedges, so none runs on
the event loop. Calls go through *lanes*: one per chip (keyed by its physical
id) and one for node-wide calls (init, the card list, the fault subscription).
Calls on one lane run in order, on that lane's worker thread; lanes run side by
side. A call that hangs therefore holds up its own lane only: every other chip
keeps being polled at its normal pace.

A call that overruns the timeout makes its lane *stuck*. Its thread is
abandoned (it is still inside the library; nothing can take it back) and the
lane refuses further calls with :class:`LaneStuck` until a retry is due. Retries
back off (1 s, 2 s, 4 s ... up to a minute) and each runs on a fresh thread, but
only while the lane and the whole process hold fewer abandoned threads than
their caps: a wedged driver costs a bounded number of threads, never one per
poll. When an abandoned call finally returns, or a retry succeeds, the lane is
free again and the listeners hear of it, so the chip recovers by the normal
path.

*Background* jobs (:meth:`ChipCalls.background`: the chip telemetry) run on the
same lanes, after the health calls: a health call that comes while a background
job runs waits for its current call only (the job sees it and returns what it
has read), and a background call that overruns its own, shorter timeout gives
its thread up at once, so the health calls go on on a fresh thread: the lane is
not stuck for them, and the chip's health is not touched. The lane takes no
background job until that call has returned.

Results travel back to the event loop from these threads, and fault events from
the library's own thread; every such hand-off goes through :func:`hand_to_loop`,
which knows that a thread can finish after the loop has closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ParamSpec, TypeVar, TypeVarTuple

from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

LaneKey = int | None  # a chip's physical id; None for node-wide calls
NODE: LaneKey = None

# A call observer: (function name, seconds, outcome), outcome "ok", a DCMI code,
# "timeout", "stuck", or an exception class name.
CallObserver = Callable[[str, float, str], None]
LaneListener = Callable[[LaneKey, "StuckCall | None"], None]

RETRY_BACKOFF = Backoff(1.0, 60.0)
MAX_ABANDONED_PER_LANE = 2
MAX_ABANDONED = 32
_NOTHING_LONGER: Mapping[str, float] = MappingProxyType({})


def hand_to_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[*Ts], object], *args: *Ts) -> bool:
    """Run ``callback(*args)`` on ``loop`` soon, from any thread; False when the loop has closed.

    A thread can finish after the loop is gone: a call abandoned at shutdown
    returns at last, or the driver delivers one more fault event. Nobody waits
    for it any more, so there is nothing to do; raising instead would only end
    as a traceback in the log (concurrent.futures logs what a done-callback
    raises, the DCMI binding what an event handler raises).
    """
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed
        return False
    return True


def call_outcome(error: BaseException) -> str:
    """How the observers name a failed call: its DCMI code, or the exception's class."""
    code = getattr(error, "code", None)
    return str(code) if isinstance(code, int) else type(error).__name__


def lane_name(key: LaneKey) -> str:
    """How logs and metrics name a lane."""
    return "node" if key is None else f"chip {key}"


@dataclass(frozen=True)
class StuckCall:
    """A call that overran its timeout and has not returned yet."""

    name: str
    lane: LaneKey
    since: float  # time.monotonic() when the first call that hung started
    retry_at: float  # time.monotonic() when the lane may try again
    attempts: int  # calls that hung since the lane was last free
    timeout: float  # the timeout it overran

    def stuck_for(self, now: float) -> float:
        """Seconds since the call that hung started."""
        return now - self.since

    @property
    def overran(self) -> str:
        """``driver call read_health did not return within 5 s``: what a stuck chip's verdict says."""
        return f"driver call {self.name} did not return within {self.timeout:g} s"

    def describe(self, now: float) -> str:
        """``driver call read_health on chip 3 stuck for 12 s``."""
        return f"driver call {self.name} on {lane_name(self.lane)} stuck for {self.stuck_for(now):.0f} s"


class ChipCallError(Exception):
    """A call that did not run to completion (the library's own errors are ChipErrors)."""


class ChipCallTimeout(ChipCallError):
    """The call overran its timeout; it keeps running on its abandoned thread."""

    def __init__(self, name: str, lane: LaneKey, timeout: float) -> None:
        self.name = name
        self.lane = lane
        self.timeout = timeout
        super().__init__(f"driver call {name} on {lane_name(lane)} did not return within {timeout:g} s")


class CallsClosed(ChipCallError):
    """The plugin is shutting down: no call starts any more."""


class LaneStuck(ChipCallError):
    """The lane's last call hung; no new call is made until a retry is due."""

    def __init__(self, stuck: StuckCall, now: float) -> None:
        self.stuck = stuck
        wait = max(stuck.retry_at - now, 0.0)
        super().__init__(f"{stuck.describe(now)}; next try in {wait:.0f} s")


class BackgroundRefused(ChipCallError):
    """The lane takes no background job now: it is stuck, or its last background call has not returned."""

    def __init__(self, stuck: StuckCall, now: float) -> None:
        self.stuck = stuck
        super().__init__(stuck.describe(now))


class BackgroundCalls:
    """The calls of one background job, made in turn on the lane's thread, each timed.

    :attr:`yielding` turns True when a health call waits for the lane: the job
    then returns what it has read so far, and reads the rest another time. Once
    the job was given up (a call overran), no further call of it starts: the
    lane's calls go on on another thread.
    """

    def __init__(self, lane: _Lane, longer: Mapping[str, float]) -> None:
        self._lane = lane
        self.longer = longer  # call name -> seconds it may take beyond the job's per-call limit
        self.given_up = False
        # (name, time.monotonic() at its start) of the call running, ("", end) between calls; one attribute.
        self.running: tuple[str, float] | None = None
        self.done: list[tuple[str, float, str]] = []  # (name, seconds, outcome) of every call that returned

    def left(self, limit: float) -> float:
        """Seconds the call running may still take, each call held to ``limit`` (and its ``longer``)."""
        running = self.running
        if running is None:
            return limit  # not started yet: it has waited for the thread only
        return running[1] + limit + self.longer.get(running[0], 0.0) - time.monotonic()

    @property
    def yielding(self) -> bool:
        """A health call waits for this lane."""
        return self._lane.waiting > 0

    def call(self, name: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)``, here on the lane's thread, timed and recorded as ``name``."""
        if self.given_up:
            raise CallsClosed(f"driver call {name} not made: its background job was given up")
        started = time.monotonic()
        self.running = (name, started)
        outcome = "ok"
        try:
            return function(*args, **kwargs)
        except Exception as error:
            outcome = call_outcome(error)
            raise
        finally:
            ended = time.monotonic()
            self.done.append((name, ended - started, outcome))
            self.running = ("", ended)


class _Worker:
    """A daemon thread running submitted calls in order.

    Not a ThreadPoolExecutor: its threads are joined at interpreter exit, so a
    driver call that never returns would keep the process from exiting.
    """

    _numbers = itertools.count()

    def __init__(self, lane: LaneKey) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[concurrent.futures.Future[object], Callable[[], object]] | None
        ] = queue.SimpleQueue()
        name = f"dcmi-{'node' if lane is None else f'chip{lane}'}-{next(self._numbers)}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, function: Callable[[], T]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((future, function))  # type: ignore[arg-type]
        return future

    def stop(self) -> None:
        """End the thread after its current call (at once when idle)."""
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


def _nothing() -> None:
    """A call that only tells that the lane's earlier calls are done."""


async def _answer(
    future: concurrent.futures.Future[T], limit: float, left: Callable[[], float] | None = None
) -> T:
    """The call's result once its thread has it; TimeoutError after ``limit`` seconds (the call goes on).

    Every health poll comes through here, so it is kept to one loop future, one
    timer and one thread-safe wake-up: a third of what ``wait_for(shield(
    wrap_future(...)))`` costs per call. Cancelling the caller leaves the call
    running on its thread, as a shield would; its outcome then stays with the
    thread's future, where nothing reports it as lost. A job of several calls
    gives ``left``: when the timer fires, how long the call running then may
    still take (each call is held to the limit from its own start).
    """
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    timer: asyncio.TimerHandle | None = None

    def wake() -> None:
        if not answered.done():
            answered.set_result(None)

    def check() -> None:
        nonlocal timer
        more = left() if left is not None else 0.0
        if more <= 0:
            wake()
        else:
            timer = loop.call_later(more, check)

    timer = loop.call_later(limit, check)
    future.add_done_callback(lambda _: hand_to_loop(loop, wake))
    try:
        await answered
    finally:
        timer.cancel()
    if not future.done():
        raise TimeoutError
    return future.result()


@dataclass
class _Lane:
    key: LaneKey
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    worker: _Worker | None = None
    stuck: StuckCall | None = None
    abandoned: int = 0  # threads of this lane still inside a call that hung
    waiting: int = 0  # health calls waiting for the lane: a background job gives way to them
    background_stuck: StuckCall | None = None  # a background call that overran and has not returned


class ChipCalls:
    """Runs blocking library calls on per-lane worker threads with a per-call timeout."""

    def __init__(
        self,
        timeout: float,
        *,
        retry_backoff: Backoff = RETRY_BACKOFF,
        max_abandoned_per_lane: int = MAX_ABANDONED_PER_LANE,
        max_abandoned: int = MAX_ABANDONED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.retry_backoff = retry_backoff
        self.max_abandoned_per_lane = max_abandoned_per_lane
        self.max_abandoned = max_abandoned
        self.clock = clock
        self._lanes: dict[LaneKey, _Lane] = {}
        self._listeners: list[LaneListener] = []
        self._observers: list[CallObserver] = []
        self._closed = False
        self._chips_closed = False  # drain_chip_lanes: only node-wide calls from then on

    # -- what others read -----------------------------------------------------------

    def stuck_calls(self) -> list[StuckCall]:
        """Every lane's stuck call, node-wide first, then by chip."""
        stuck = [lane.stuck for lane in self._lanes.values() if lane.stuck is not None]
        return sorted(stuck, key=lambda call: (call.lane is not None, call.lane or 0))

    def stuck(self, lane: LaneKey) -> StuckCall | None:
        """The stuck call of one lane, if any."""
        found = self._lanes.get(lane)
        return found.stuck if found is not None else None

    def waiting(self, lane: LaneKey) -> int:
        """Calls waiting for the lane (a background job on it gives way to them after its current call)."""
        found = self._lanes.get(lane)
        return found.waiting if found is not None else 0

    @property
    def abandoned_threads(self) -> int:
        """Threads still inside calls that hung."""
        return sum(lane.abandoned for lane in self._lanes.values())

    def on_lane_change(self, listener: LaneListener) -> Callable[[], None]:
        """Call ``listener(lane, stuck)`` when a lane gets stuck and ``(lane, None)`` when it is free.

        Returns the way to stop listening (parts that listen may be restarted).
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_call_done(self, observer: CallObserver) -> None:
        """Call ``observer(name, seconds, outcome)`` after every call (for metrics)."""
        self._observers.append(observer)

    # -- calling ---------------------------------------------------------------------

    async def node(self, name: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a node-wide call (init, enumeration, subscription) on the node lane."""
        return await self.call(NODE, name, function, *args, **kwargs)

    async def call(
        self, lane: LaneKey, name: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``function`` on ``lane``'s worker; ChipCallTimeout or LaneStuck when it cannot."""
        if self._closed or (self._chips_closed and lane is not NODE):
            raise CallsClosed(f"driver call {name} on {lane_name(lane)} refused: shutting down")
        state = self._lane(lane)
        state.waiting += 1
        try:
            await state.lock.acquire()
        finally:
            state.waiting -= 1
        try:
            if state.stuck is not None:
                self._may_retry(state)
            if state.worker is None:
                state.worker = _Worker(lane)
            return await self._run(state, state.worker, name, lambda: function(*args, **kwargs))
        finally:
            state.lock.release()

    async def background(
        self,
        lane: LaneKey,
        name: str,
        job: Callable[[BackgroundCalls], T],
        *,
        per_call: float,
        longer: Mapping[str, float] = _NOTHING_LONGER,
    ) -> T:
        """Run ``job`` on ``lane``'s worker after the health calls; each call held to ``per_call`` s.

        ``longer``: calls (by name) that may take that many seconds more (one that samples over a period).

        BackgroundRefused while the lane is stuck or a background call of it
        hangs; ChipCallTimeout (naming the call) when one overruns: its thread is
        given up, the lane stays free for the health calls. The observers hear of
        the job as one call named ``name``, and of each of its calls that failed.
        """
        if self._closed or (self._chips_closed and lane is not NODE):
            raise CallsClosed(f"driver call {name} on {lane_name(lane)} refused: shutting down")
        state = self._lane(lane)
        async with state.lock:
            hung = state.stuck or state.background_stuck
            if hung is not None:
                raise BackgroundRefused(hung, self.clock())
            if state.worker is None:
                state.worker = _Worker(lane)
            worker, calls = state.worker, BackgroundCalls(state, longer)
            future = worker.submit(lambda: job(calls))
            started, outcome = time.monotonic(), "ok"
            try:
                return await _answer(future, per_call, lambda: calls.left(per_call))
            except TimeoutError:
                outcome = "timeout"
                calls.given_up = True
                hung_name, since = calls.running or (name, time.monotonic())
                overran = time.monotonic() - since
                limit = per_call + longer.get(hung_name, 0.0)
                stuck = StuckCall(hung_name or name, lane, self.clock() - overran, float("inf"), 1, limit)
                self._observe(stuck.name, overran, "timeout")
                self._give_up_background(state, worker, future, stuck)
                raise ChipCallTimeout(stuck.name, lane, limit) from None
            except Exception as error:
                outcome = call_outcome(error)
                raise
            finally:
                # The job as one call, and each of its calls that failed: a background job makes many
                # small calls on every chip, which would otherwise crowd the latency histogram.
                self._observe(name, time.monotonic() - started, outcome)
                for done in calls.done:
                    if done[2] != "ok":
                        self._observe(*done)

    def _lane(self, lane: LaneKey) -> _Lane:
        state = self._lanes.get(lane)
        if state is None:
            state = self._lanes[lane] = _Lane(lane)
        return state

    def _give_up_background(
        self, lane: _Lane, worker: _Worker, future: concurrent.futures.Future[T], stuck: StuckCall
    ) -> None:
        """A background call overran: its thread is given up, the lane goes on on a fresh one."""
        loop = asyncio.get_running_loop()
        lane.background_stuck = stuck
        lane.worker = None
        lane.abandoned += 1
        worker.stop()  # the thread ends once the call returns

        def returned() -> None:
            lane.abandoned -= 1
            lane.background_stuck = None

        future.add_done_callback(lambda _: hand_to_loop(loop, returned))

    def _may_retry(self, lane: _Lane) -> None:
        """Raise LaneStuck unless the stuck lane's next try is due and the thread caps allow it."""
        assert lane.stuck is not None
        now = self.clock()
        capped = lane.abandoned >= self.max_abandoned_per_lane or self.abandoned_threads >= self.max_abandoned
        if now < lane.stuck.retry_at or capped:
            self._observe(lane.stuck.name, 0.0, "stuck")
            raise LaneStuck(lane.stuck, now)

    async def _run(self, lane: _Lane, worker: _Worker, name: str, job: Callable[[], T]) -> T:
        started = self.clock()
        future = worker.submit(job)
        outcome = "ok"
        try:
            result = await _answer(future, self.timeout)
        except TimeoutError:
            outcome = "timeout"
            self._hung(lane, worker, future, name, started)
            raise ChipCallTimeout(name, lane.key, self.timeout) from None
        except Exception as error:
            outcome = call_outcome(error)
            self._answered(lane)  # an error is an answer: the lane is not stuck
            raise
        finally:
            self._observe(name, self.clock() - started, outcome)
        self._answered(lane)
        return result

    def _hung(
        self,
        lane: _Lane,
        worker: _Worker,
        future: concurrent.futures.Future[T],
        name: str,
        started: float,
    ) -> None:
        """The call overran: abandon its thread, mark the lane stuck, schedule the retry."""
        loop = asyncio.get_running_loop()
        previous = lane.stuck
        attempts = previous.attempts + 1 if previous is not None else 1
        since = previous.since if previous is not None else started
        retry_at = self.clock() + self.retry_backoff.after(attempts)
        lane.stuck = StuckCall(name, lane.key, since, retry_at, attempts, self.timeout)
        lane.worker = None
        lane.abandoned += 1
        worker.stop()  # the thread ends once the call returns
        future.add_done_callback(lambda _: hand_to_loop(loop, self._abandoned_returned, lane, name))
        log.error(
            "driver call %s on %s did not return within %g s; %s, retrying in %.0f s",
            name,
            lane_name(lane.key),
            self.timeout,
            "the plugin is not ready" if lane.key is None else "the chip is marked unhealthy",
            self.retry_backoff.after(attempts),
            extra={"call": name, "lane": lane_name(lane.key), "attempt": attempts},
        )
        self._notify(lane.key, lane.stuck)

    def _abandoned_returned(self, lane: _Lane, name: str) -> None:
        """An abandoned call came back: the driver answers on this lane again."""
        lane.abandoned -= 1
        if lane.stuck is None or self._closed:
            return
        log.warning(
            "stuck driver call %s on %s returned after %.1f s",
            name,
            lane_name(lane.key),
            lane.stuck.stuck_for(self.clock()),
            extra={"call": name, "lane": lane_name(lane.key)},
        )
        lane.stuck = None
        self._notify(lane.key, None)

    def _answered(self, lane: _Lane) -> None:
        if lane.stuck is not None:
            log.warning("driver calls on %s answer again", lane_name(lane.key))
            lane.stuck = None
            self._notify(lane.key, None)

    def _notify(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        for listener in list(self._listeners):
            listener(lane, stuck)

    def _observe(self, name: str, seconds: float, outcome: str) -> None:
        for observer in self._observers:
            observer(name, seconds, outcome)

    async def drain_chip_lanes(self) -> bool:
        """Refuse new chip calls and wait for those in flight; True when no thread of ours is left inside.

        The library may be unloaded (``close``, on the node lane) only then:
        lanes run side by side, so a node-lane call does not wait for a chip's
        call in flight, and unloading the library under it would crash the
        process when that call returns. A worker runs its jobs in order, so a
        no-op handed to each returns once the call before it is done. False, at
        once or after a call timeout, while a call hangs (its abandoned thread
        is still inside the library).
        """
        self._chips_closed = True
        for lane in list(self._lanes.values()):
            if self.abandoned_threads:
                return False
            if lane.key is NODE or lane.worker is None:
                continue
            try:
                await _answer(lane.worker.submit(_nothing), self.timeout)
            except TimeoutError:
                return False
        return self.abandoned_threads == 0

    def shutdown(self) -> None:
        """Let every worker thread end after its current call; stuck calls are abandoned."""
        self._closed = True
        for lane in self._lanes.values():
            if lane.worker is not None:
                lane.worker.stop()
                lane.worker = None
