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

A *lane job* makes several calls in one hand-off to the thread (a chip's
health, fault codes and vNPUs of one poll): :meth:`ChipCalls.run` with a
function of :class:`LaneCalls`. Each of its calls is still timed, reported to
the call observers and held to the timeout from its own start. Jobs run *in
turn* wait for each other, so that the chips' threads do not wake together and
fight over the interpreter (:mod:`ascend_plugin.call_turns`).

*Background* jobs (:meth:`ChipCalls.background`: the chip telemetry) run on the
same lanes, in turn, after the health calls: a health call that comes while a
background job runs waits for its current call only (the job sees it and
returns what it has read), and a background call that overruns its own,
shorter timeout gives its thread up at once, so the health calls go on on a
fresh thread: the lane is not stuck for them, and the chip's health is not
touched. The lane takes no background job until that call has returned.

Results travel back to the event loop from these threads, and fault events from
the library's own thread; every such hand-off goes through
:func:`~ascend_plugin.call_turns.hand_to_loop`, which knows that a thread can
finish after the loop has closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

from ascend_plugin.call_turns import Turn, Turns, hand_to_loop
from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

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
    """Root of the call errors: a library call that did not run to completion.

    What belongs here: a call that overran its timeout, a lane whose last
    call still hangs, calls refused because the plugin is shutting down. An
    answer the library gave, error or not, is the library's: a ``ChipError``
    passes through unchanged. Callers catch both where a chip's state is
    judged (the monitor, discovery).
    """


class ChipCallTimeout(ChipCallError):
    """The call overran its timeout; it keeps running on its abandoned thread."""

    def __init__(self, name: str, lane: LaneKey, timeout: float) -> None:
        self.name = name
        self.lane = lane
        self.timeout = timeout
        super().__init__(f"driver call {name} on {lane_name(lane)} did not return within {timeout:g} s")


class CallsClosed(ChipCallError):
    """The plugin is shutting down: no call starts any more."""


class BackgroundRefused(ChipCallError):
    """The lane takes no background job now: it is stuck, or its last background call has not returned."""

    def __init__(self, stuck: StuckCall, now: float) -> None:
        self.stuck = stuck
        super().__init__(stuck.describe(now))


class LaneStuck(ChipCallError):
    """The lane's last call hung; no new call is made until a retry is due."""

    def __init__(self, stuck: StuckCall, now: float) -> None:
        self.stuck = stuck
        wait = max(stuck.retry_at - now, 0.0)
        super().__init__(f"{stuck.describe(now)}; next try in {wait:.0f} s")


class LaneCalls:
    """The library calls of one lane job, made one after another on the lane's thread.

    The job is a function of this object and makes its calls through
    :meth:`call`. Each call is timed and its outcome kept for the call
    observers; :attr:`running` tells the coroutine waiting for the job which
    call runs since when, so that each call is held to the timeout on its own,
    as if it had been handed over alone.
    """

    def __init__(self) -> None:
        # (name, time.monotonic() at its start) of the call running; ("", when the last returned)
        # between calls; None before the job started. One attribute: never read half-updated.
        self.running: tuple[str, float] | None = None
        self.done: list[tuple[str, float, str]] = []  # (name, seconds, outcome) of every call that returned

    def call(self, name: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)``, here on the lane's thread, timed and recorded as ``name``."""
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

    def deadline(self, limit: float) -> float | None:
        """When the call running overruns ``limit`` (time.monotonic()); None before the job started."""
        running = self.running
        return None if running is None else running[1] + limit


class BackgroundCalls(LaneCalls):
    """The calls of one background job: each held to the job's limit (calls in ``longer`` to more).

    :attr:`yielding` turns True when a health call waits for the lane: the job
    then returns what it has read so far, and reads the rest another time. Once
    the job was given up (a call overran), no further call of it starts: the
    lane's calls go on on another thread.
    """

    def __init__(self, lane: _Lane, longer: Mapping[str, float]) -> None:
        super().__init__()
        self._lane = lane
        self.longer = longer  # call name -> seconds it may take beyond the job's per-call limit
        self.given_up = False

    @property
    def yielding(self) -> bool:
        """A health call waits for this lane."""
        return self._lane.waiting > 0

    def call(self, name: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.given_up:
            raise CallsClosed(f"driver call {name} not made: its background job was given up")
        return super().call(name, function, *args, **kwargs)

    def deadline(self, limit: float) -> float | None:
        due = super().deadline(limit)
        running = self.running
        return None if due is None or running is None else due + self.longer.get(running[0], 0.0)


Job = Callable[[LaneCalls], T]


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

    def prepare(self, function: Callable[[], T]) -> tuple[concurrent.futures.Future[T], Callable[[], None]]:
        """The future of ``function``'s result, and what hands it to this thread (from any thread)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        return future, lambda: self._jobs.put((future, function))  # type: ignore[arg-type]

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


def _nothing(_: LaneCalls) -> None:
    """A job that only tells that the lane's earlier jobs are done."""


@dataclass
class _Handed:
    """A job handed to a lane's thread: its result to come, its calls, its turn, and its end on the loop."""

    future: concurrent.futures.Future[Any]
    calls: LaneCalls
    turn: Turn
    ended: asyncio.Future[None]

    def wake(self) -> None:
        """On the loop: the job ended (the turns hand this over from the thread)."""
        _end(self.ended)


def _end(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


def _ended(turns: Turns, turn: Turn, ended: asyncio.Future[None], _: concurrent.futures.Future[Any]) -> None:
    """The job's future is done (on its thread): the turns tell the loop."""
    turns.ended(turn, functools.partial(_end, ended))


async def _answer(handed: _Handed, limit: float) -> Any:
    """The job's result once its thread has it; TimeoutError once one of its calls overran ``limit``.

    Every health poll comes through here, so it is kept to one loop future, one
    timer and the turns' hand-off from the thread. The timer looks at the call
    running when it fires and waits on until that call's own deadline (a job
    still waiting for its turn has none yet). Cancelling the caller leaves the
    job running on its thread, as a shield would; its outcome then stays with
    the thread's future, where nothing reports it as lost.
    """
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal timer
        due = handed.calls.deadline(limit)
        left = limit if due is None else due - time.monotonic()
        if left <= 0:
            handed.wake()
        else:
            timer = loop.call_later(left, check)

    timer = loop.call_later(limit, check)
    try:
        await handed.ended
    finally:
        timer.cancel()
    if not handed.future.done():
        raise TimeoutError
    return handed.future.result()


@dataclass
class _Lane:
    key: LaneKey
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    worker: _Worker | None = None
    stuck: StuckCall | None = None
    abandoned: int = 0  # threads of this lane still inside a call that hung
    waiting: int = 0  # jobs waiting for the lane: a background job gives way to them
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
        self._turns = Turns()

    # -- what others read -----------------------------------------------------------

    def stuck_calls(self) -> list[StuckCall]:
        """Every lane's stuck call, node-wide first, then by chip."""
        stuck = [lane.stuck for lane in self._lanes.values() if lane.stuck is not None]
        return sorted(stuck, key=lambda call: (call.lane is not None, call.lane or 0))

    def stuck(self, lane: LaneKey) -> StuckCall | None:
        """The stuck call of one lane, if any."""
        found = self._lanes.get(lane)
        return found.stuck if found is not None else None

    def next_try(self, lane: LaneKey) -> float | None:
        """When (this clock) the stuck lane may try a call again; None when it is not stuck, or may not yet.

        A lane at its cap of abandoned threads (or the process at its own) makes
        no call until one of them returns, however long ago its retry fell due:
        that return is told to the lane's listeners (:meth:`on_lane_change`), so
        a caller waits for it instead of asking again and again.
        """
        found = self._lanes.get(lane)
        if found is None or found.stuck is None or self._capped(found):
            return None
        return found.stuck.retry_at

    def waiting(self, lane: LaneKey) -> int:
        """Jobs waiting for the lane (a background job on it gives way to them after its current call)."""
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
        return await self.run(lane, name, lambda calls: calls.call(name, function, *args, **kwargs))

    async def run(self, lane: LaneKey, name: str, job: Job[T], *, in_turn: bool = False) -> T:
        """Run the lane job ``name`` on ``lane``'s worker; each of its calls is held to the timeout.

        ``in_turn``: after the jobs handed over before it that were in turn too
        (:mod:`ascend_plugin.call_turns`). ChipCallTimeout names the call that
        overran; LaneStuck when the lane cannot take a job now.
        """
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
            return await self._run(state, state.worker, name, job, in_turn)
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
        """Run ``job`` on ``lane``'s worker, in turn, after the health calls; each call held to ``per_call``.

        ``longer``: calls (by name) that may take that many seconds more (one
        that samples over a period). BackgroundRefused while the lane is stuck
        or a background call of it hangs; ChipCallTimeout (naming the call) when
        one overruns: its thread is given up, the lane stays free for the health
        calls. The observers hear of the job as one call named ``name``, and of
        each of its calls that failed: a background job makes many small calls
        on every chip, which would otherwise crowd the latency histogram.
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
            handed = self._hand_over(worker, name, job, in_turn=True, calls=calls)  # type: ignore[arg-type]
            started, outcome = time.monotonic(), "ok"
            try:
                result: T = await _answer(handed, per_call)
                return result
            except TimeoutError:
                outcome = "timeout"
                calls.given_up = True
                self._turns.lose(handed.turn)
                hung_name, since = calls.running or (name, time.monotonic())
                hung_name = hung_name or name
                overran = time.monotonic() - since
                limit = per_call + longer.get(hung_name, 0.0)
                stuck = StuckCall(hung_name, lane, self.clock() - overran, float("inf"), 1, limit)
                self._observe(stuck.name, overran, "timeout")
                self._give_up_background(state, worker, handed.future, stuck)
                raise ChipCallTimeout(stuck.name, lane, limit) from None
            except Exception as error:
                outcome = call_outcome(error)
                raise
            finally:
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
        self, lane: _Lane, worker: _Worker, future: concurrent.futures.Future[Any], stuck: StuckCall
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
        if now < lane.stuck.retry_at or self._capped(lane):
            self._observe(lane.stuck.name, 0.0, "stuck")
            raise LaneStuck(lane.stuck, now)

    def _capped(self, lane: _Lane) -> bool:
        """Whether the lane may start no thread: it, or the process, holds all the abandoned ones it may."""
        return lane.abandoned >= self.max_abandoned_per_lane or self.abandoned_threads >= self.max_abandoned

    def _hand_over(
        self, worker: _Worker, name: str, job: Job[T], *, in_turn: bool, calls: LaneCalls | None = None
    ) -> _Handed:
        """Give ``job`` to ``worker``, now or in its turn; the end comes back through the turns."""
        calls = calls if calls is not None else LaneCalls()

        def work() -> T:
            calls.running = ("", time.monotonic())  # started: the timeout runs from here
            return job(calls)

        future, submit = worker.prepare(work)

        def refuse() -> None:
            if future.set_running_or_notify_cancel():
                future.set_exception(CallsClosed(f"driver call {name} refused: shutting down"))

        turn = Turn(submit, refuse, in_turn)
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nothing the callback holds may hold the future: every poll's objects go as soon as it is answered.
        future.add_done_callback(functools.partial(_ended, self._turns, turn, ended))
        self._turns.start(turn)
        return _Handed(future, calls, turn, ended)

    async def _run(self, lane: _Lane, worker: _Worker, name: str, job: Job[T], in_turn: bool) -> T:
        handed = self._hand_over(worker, name, job, in_turn=in_turn)
        try:
            result: T = await _answer(handed, self.timeout)
        except TimeoutError:
            self._report(handed.calls)
            hung, since = handed.calls.running or ("", time.monotonic())
            hung = hung or name
            self._observe(hung, time.monotonic() - since, "timeout")
            self._turns.lose(handed.turn)
            self._hung(lane, worker, handed.future, hung, self.clock() - (time.monotonic() - since))
            raise ChipCallTimeout(hung, lane.key, self.timeout) from None
        except Exception:
            self._report(handed.calls)
            self._answered(lane)  # an error is an answer: the lane is not stuck
            raise
        self._report(handed.calls)
        self._answered(lane)
        return result

    def _report(self, calls: LaneCalls) -> None:
        for name, seconds, outcome in calls.done:
            self._observe(name, seconds, outcome)

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
        """An abandoned call came back: the driver answers on this lane again.

        It frees a place under the process's cap too: every other stuck lane
        under its own cap is told, since the process's may have held it back.
        """
        lane.abandoned -= 1
        if self._closed:
            return
        for other in self._lanes.values():
            held_back = other.stuck is not None and other.abandoned < self.max_abandoned_per_lane
            if other is not lane and held_back:
                self._notify(other.key, other.stuck)
        if lane.stuck is None:
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
                await _answer(self._hand_over(lane.worker, "drain", _nothing, in_turn=False), self.timeout)
            except TimeoutError:
                return False
        return self.abandoned_threads == 0

    def shutdown(self) -> None:
        """Let every worker thread end after its current call; stuck calls are abandoned."""
        self._closed = True
        self._turns.refuse_waiting()
        for lane in self._lanes.values():
            if lane.worker is not None:
                lane.worker.stop()
                lane.worker = None
