"""Every chip-library call runs here: on its lane's worker thread, with a deadline.

DCMI calls block, for seconds or forever when a card wedges, so none runs on the
event loop. Each chip has a *lane* (one more for node-wide calls): a thread that
runs its calls in order, so a hung call holds up its own chip only. A call's
deadline counts from when it was queued and is kept by the lane, whoever waits:
past it the lane is *stuck*, its thread abandoned (still inside the library),
and it refuses calls until a retry is due; retries back off, each on a fresh
thread, within caps of abandoned threads per lane and per process. *Background*
calls (telemetry) run on a second thread of the lane: health calls never wait
for them, and one that overruns leaves the chip's health alone. Calls queued in
one pass of the loop run in turn and are answered together (:class:`_Round`).
More: ARCHITECTURE.md "The chip lane"; the idle figures: docs/performance.md.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, TypeVarTuple, cast

from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

LaneKey = int | None  # a chip's physical id; None for node-wide calls
NODE: LaneKey = None
# A call observer: (function name, seconds, outcome), outcome "ok", a DCMI code, "timeout", "stuck",
# or an exception class name.
CallObserver = Callable[[str, float, str], None]
LaneListener = Callable[[LaneKey, "StuckCall | None"], None]

RETRY_BACKOFF = Backoff(1.0, 60.0)
MAX_ABANDONED_PER_LANE = 2
MAX_ABANDONED = 32
TURN_LIMIT = 0.1  # seconds a call may hold its round's turn before the next one starts beside it


def call_outcome(error: BaseException) -> str:
    """How the observers name a failed call: its DCMI code, or the exception's class."""
    code = getattr(error, "code", None)
    return str(code) if isinstance(code, int) else type(error).__name__


def lane_name(key: LaneKey) -> str:
    """How logs and metrics name a lane."""
    return "node" if key is None else f"chip {key}"


def hand_to_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[*Ts], object], *args: *Ts) -> bool:
    """Run ``callback(*args)`` on ``loop`` soon, from any thread; False when the loop has closed.

    A thread can finish after the loop is gone (a call abandoned at shutdown
    returns, the driver sends one more fault event): nobody waits for it any
    more, and raising would only end as a traceback in the log.
    """
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed
        return False
    return True


@dataclass(frozen=True)
class StuckCall:
    """A call that overran its deadline and has not returned yet."""

    name: str
    lane: LaneKey
    since: float  # clock time when the first call that hung started
    retry_at: float  # clock time when the lane may try again (inf: once the call returned)
    attempts: int  # calls that hung since the lane was last free
    timeout: float  # the timeout it overran

    def stuck_for(self, now: float) -> float:
        return now - self.since

    @property
    def overran(self) -> str:
        """``driver call read_health did not return within 5 s``: what a stuck chip's verdict says."""
        return f"driver call {self.name} did not return within {self.timeout:g} s"

    def describe(self, now: float) -> str:
        """``driver call read_health on chip 3 stuck for 12 s``."""
        return f"driver call {self.name} on {lane_name(self.lane)} stuck for {self.stuck_for(now):.0f} s"


class ChipCallError(Exception):
    """Root of the call errors: a call past its deadline, or refused (a stuck lane, shutting down).

    An answer the library gave, error or not, is the library's: a ``ChipError``
    passes through unchanged. Callers catch both where a chip is judged.
    """


class ChipCallTimeout(ChipCallError):
    """The call overran its deadline; it keeps running on its abandoned thread."""

    def __init__(self, name: str, lane: LaneKey, timeout: float) -> None:
        self.name, self.lane, self.timeout = name, lane, timeout
        super().__init__(f"driver call {name} on {lane_name(lane)} did not return within {timeout:g} s")


class LaneStuck(ChipCallError):
    """The lane refuses the call: a call of it hangs, and no retry is due."""

    def __init__(self, stuck: StuckCall, now: float, *, until_it_returns: bool) -> None:
        self.stuck = stuck
        when = "once a hung call returns" if until_it_returns else f"in {max(stuck.retry_at - now, 0):.0f} s"
        super().__init__(f"{stuck.describe(now)}; next try {when}")


_running = threading.local()  # .job: the call this lane thread runs


def step(name: str, function: Callable[[*Ts], T], *args: *Ts, longer: float = 0.0) -> T:
    """One of several library calls a function run on a lane makes in one hand-off (a telemetry round).

    Each is held to the call's timeout from its own start (``longer`` more for
    one that samples over a period), and named on its own in a timeout and,
    when it fails, to the observers. Outside a lane's thread, a plain call.
    """
    job: _Job | None = getattr(_running, "job", None)
    if job is None:
        return function(*args)
    if job.given_up:
        raise ChipCallError(f"driver call {name} not made: its lane gave the call up")
    started = time.monotonic()
    job.deadline = started + job.limit + longer
    job.under_way = (name, started, job.limit + longer)
    try:
        return function(*args)
    except Exception as error:
        job.failed.append((name, time.monotonic() - started, call_outcome(error)))
        raise
    finally:
        job.under_way = None
        job.deadline = time.monotonic() + job.limit


class _Job:
    """One call: what it runs, where, its deadline (time.monotonic()), and its answer on the loop."""

    def __init__(self, lane: _Lane, worker: _Worker, name: str, run: Callable[[], Any], limit: float) -> None:
        self.lane, self.worker, self.name, self.run, self.limit = lane, worker, name, run, limit
        self.queued = time.monotonic()
        self.deadline = self.queued + limit  # each step moves it
        self.started = 0.0
        self.under_way: tuple[str, float, float] | None = None  # the step running: name, start, limit
        self.failed: list[tuple[str, float, str]] = []  # steps that failed: name, seconds, outcome
        self.seconds, self.result, self.error = 0.0, None, cast(BaseException | None, None)
        self.answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None
        self.round: _Round | None = None
        self.ended = False  # answered, refused or given up, on the loop
        self.given_up = False  # past its deadline while running: its thread is abandoned
        self._taken = threading.Lock()

    def take(self) -> bool:
        """Claim the job, to run it (its thread) or to end it unstarted (the loop): True once."""
        return self._taken.acquire(blocking=False)

    def execute(self) -> None:
        """Run it, here on its lane's thread."""
        self.started = time.monotonic()
        _running.job = self
        try:
            self.result = self.run()
        except BaseException as error:  # handed to the caller
            self.error = error
        finally:
            _running.job = None
            self.seconds = time.monotonic() - self.started

    def hung(self) -> tuple[str, float, float]:
        """The call that overran: its name, when it started, its limit."""
        return self.under_way or (self.name, self.started or self.queued, self.limit)

    def settle(self, error: BaseException | None = None) -> None:
        """End the job (on the loop) and give the caller its answer, unless it stopped waiting."""
        self.ended = True
        if self.timer is not None:
            self.timer.cancel()
        if self.answer.done():
            return
        if error is not None or self.error is not None:
            self.answer.set_exception(error or cast(BaseException, self.error))
        else:
            self.answer.set_result(self.result)


class _Worker:
    """A daemon thread running a lane's calls in order (a pool's threads are joined at exit: a hung
    call would keep the process from exiting)."""

    _numbers = itertools.count()

    def __init__(self, lane: LaneKey, background: bool) -> None:
        self.background = background
        self.jobs: collections.deque[_Job] = collections.deque()  # queued and not ended (on the loop)
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        name = f"dcmi-{'node' if lane is None else f'chip{lane}'}{'-background' * background}"
        threading.Thread(target=self._run, name=f"{name}-{next(self._numbers)}", daemon=True).start()

    def hand(self, job: _Job) -> None:
        self._queue.put(job)

    def stop(self) -> None:
        """End the thread after its current call (at once when idle)."""
        self._queue.put(None)

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            if job.take():  # not refused meanwhile
                job.execute()
                assert job.round is not None
                job.round.ended(job)


class _Round:
    """Calls queued in one pass of the loop: handed to their threads one after another, answered together.

    Side by side, every chip's thread would wake at once and fight over the
    interpreter lock and the driver's: 107 wake-ups a second on an idle node of
    8 chips, against 23 in turn (bench/idle.py). Each call that ends hands the
    next to its thread; the last hands every answer to the loop at once. A call
    that holds the turn TURN_LIMIT seconds lets the next start beside it, and is
    answered alone: a slow or hung chip never holds up the others.
    """

    def __init__(self, deliver: Callable[[list[_Job]], None], limit: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._deliver = deliver
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Job] = collections.deque()
        self._holder: _Job | None = None
        self._held_since = 0.0
        self._answered: list[_Job] = []
        self._watchdog: asyncio.TimerHandle | None = None

    def add(self, job: _Job) -> None:
        job.round = self
        self._waiting.append(job)

    def start(self) -> None:
        """On the loop, once the pass that queued the calls is over."""
        with self._lock:
            first = self._pass_on()
        if first is not None:
            first.worker.hand(first)
            self._watchdog = self._loop.call_later(self._limit, self._check)

    def ended(self, job: _Job) -> None:
        """On the job's thread: the next takes the turn; once none is left, the answers go to the loop."""
        with self._lock:
            holds = job is self._holder
            following = self._pass_on() if holds else None
            if holds:
                self._answered.append(job)
            answers = self._take() if holds and self._holder is None else []
        if following is not None:
            following.worker.hand(following)
        if not holds:
            hand_to_loop(self._loop, self._deliver, [job])  # it lost its turn: answered alone
        elif answers:
            hand_to_loop(self._loop, self._finish, answers)

    def lose(self, job: _Job) -> None:
        """On the loop: the job ended without its thread (refused, given up); the round goes on."""
        with self._lock:
            if job in self._waiting:
                self._waiting.remove(job)
            following = self._pass_on() if job is self._holder else None
            complete = self._holder is None
            answers = self._take() if complete else []
        if following is not None:
            following.worker.hand(following)
        if complete:
            self._finish(answers)

    def _check(self) -> None:
        """Every TURN_LIMIT while the round runs: answers so far to the loop; a holder past the limit
        lets the next start beside it."""
        with self._lock:
            answers = self._take()
            slow = time.monotonic() - self._held_since >= self._limit
            following = self._pass_on() if self._holder is not None and slow else None
            busy = self._holder is not None
        if following is not None:
            following.worker.hand(following)
        self._deliver(answers)
        self._watchdog = self._loop.call_later(self._limit, self._check) if busy else None

    def _finish(self, answers: list[_Job]) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._deliver(answers)

    def _pass_on(self) -> _Job | None:
        """With the lock held: the turn to the next waiting job (to be handed over), or free."""
        self._holder = self._waiting.popleft() if self._waiting else None
        self._held_since = time.monotonic()
        return self._holder

    def _take(self) -> list[_Job]:
        answers, self._answered = self._answered, []
        return answers


@dataclass(eq=False)
class _Lane:
    key: LaneKey
    worker: _Worker | None = None
    background: _Worker | None = None
    stuck: StuckCall | None = None
    background_hung: StuckCall | None = None  # a background call that overran and has not returned
    abandoned: int = 0  # threads of this lane still inside a call that overran


class ChipCalls:
    """Runs blocking library calls on per-lane worker threads, each with a deadline."""

    def __init__(
        self,
        timeout: float,
        *,
        retry_backoff: Backoff = RETRY_BACKOFF,
        max_abandoned_per_lane: int = MAX_ABANDONED_PER_LANE,
        max_abandoned: int = MAX_ABANDONED,
        turn_limit: float = TURN_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.turn_limit = turn_limit
        self.retry_backoff = retry_backoff
        self.max_abandoned_per_lane = max_abandoned_per_lane
        self.max_abandoned = max_abandoned
        self.clock = clock
        self._lanes: dict[LaneKey, _Lane] = {}
        self._listeners: list[LaneListener] = []
        self._observers: list[CallObserver] = []
        self._closed = False
        self._chips_closed = False  # drain_chip_lanes: only node-wide calls from then on
        self._forming: _Round | None = None  # the round of this pass of the loop
        self._drain: asyncio.Future[None] | None = None  # woken when a call ends while draining

    # -- what others read -----------------------------------------------------------

    def stuck_calls(self) -> list[StuckCall]:
        """Every lane's stuck call, node-wide first, then by chip."""
        stuck = [lane.stuck for lane in self._lanes.values() if lane.stuck is not None]
        return sorted(stuck, key=lambda call: (call.lane is not None, call.lane or 0))

    def stuck(self, lane: LaneKey) -> StuckCall | None:
        found = self._lanes.get(lane)
        return found.stuck if found is not None else None

    def next_try(self, lane: LaneKey) -> float | None:
        """When (this clock) the stuck lane may try a call again; None when not stuck, or capped.

        A lane at a cap of abandoned threads makes no call until one returns,
        however long ago its retry fell due; the listeners hear of that return.
        """
        found = self._lanes.get(lane)
        if found is None or found.stuck is None or self._capped(found):
            return None
        return found.stuck.retry_at

    @property
    def abandoned_threads(self) -> int:
        """Threads still inside calls that overran."""
        return sum(lane.abandoned for lane in self._lanes.values())

    def on_lane_change(self, listener: LaneListener) -> Callable[[], None]:
        """Call ``listener(lane, stuck)`` when a lane gets stuck, ``(lane, None)`` when free; returns undo."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_call_done(self, observer: CallObserver) -> None:
        """Call ``observer(name, seconds, outcome)`` after every call (for metrics)."""
        self._observers.append(observer)

    # -- calling ---------------------------------------------------------------------

    async def call(
        self,
        lane: LaneKey,
        name: str,
        function: Callable[[*Ts], T],
        *args: *Ts,
        within: float | None = None,
        background: bool = False,
    ) -> T:
        """``function(*args)`` on ``lane``'s thread, answered ``within`` seconds (by default the timeout).

        ``background``: on the lane's second thread; past its deadline it gives
        that thread up and the lane takes no background call until it returned,
        but the chip's health is untouched. ChipCallTimeout past the deadline;
        LaneStuck when the lane takes no call now.
        """
        if self._closed or (self._chips_closed and lane is not NODE):
            raise ChipCallError(f"driver call {name} on {lane_name(lane)} refused: shutting down")
        state = self._lanes.get(lane)
        if state is None:
            state = self._lanes[lane] = _Lane(lane)
        worker = self._worker(state, background)
        limit = self.timeout if within is None else within
        job = _Job(state, worker, name, functools.partial(function, *args), limit)
        loop = asyncio.get_running_loop()
        job.timer = loop.call_later(limit, self._check, job)
        worker.jobs.append(job)
        if self._forming is None:
            self._forming = _Round(self._answer, self.turn_limit)
            loop.call_soon(self._start_round)
        self._forming.add(job)
        try:
            return cast(T, await job.answer)
        except asyncio.CancelledError:
            if job.take():  # not started: nobody wants it any more
                self._end(job, ChipCallError(f"driver call {name} withdrawn: its caller stopped waiting"))
            raise  # started: it runs on, held to its deadline all the same

    def _worker(self, lane: _Lane, background: bool) -> _Worker:
        """The worker a new call of ``lane`` goes to; LaneStuck while the lane may take none."""
        now = self.clock()
        if background:
            hung = lane.stuck or lane.background_hung
            if hung is not None:
                raise LaneStuck(hung, now, until_it_returns=True)
            lane.background = lane.background or _Worker(lane.key, True)
            return lane.background
        if lane.worker is None:
            stuck, capped = lane.stuck, self._capped(lane)
            if stuck is not None and (capped or now < stuck.retry_at):
                self._observe(stuck.name, 0.0, "stuck")
                raise LaneStuck(stuck, now, until_it_returns=capped)
            lane.worker = _Worker(lane.key, False)
        return lane.worker

    def _capped(self, lane: _Lane) -> bool:
        """Whether the lane may start no thread: it, or the process, holds all the abandoned ones it may."""
        return lane.abandoned >= self.max_abandoned_per_lane or self.abandoned_threads >= self.max_abandoned

    def _start_round(self) -> None:
        forming, self._forming = self._forming, None
        if forming is not None:
            forming.start()

    # -- on the loop: answers and deadlines -----------------------------------------

    def _answer(self, jobs: list[_Job]) -> None:
        """Jobs their threads are done with: answer the callers, count abandoned threads back."""
        for job in jobs:
            lane, worker = job.lane, job.worker
            if job.given_up:
                self._returned(lane, worker, job)
                continue
            if job.ended:
                continue
            self._end(job)
            self._report(job, job.name, job.seconds, "ok" if job.error is None else call_outcome(job.error))
            if worker is lane.worker and lane.stuck is not None:  # an answer, error or not: free again
                log.warning("driver calls on %s answer again", lane_name(lane.key))
                lane.stuck = None
                self._notify(lane.key, None)

    def _check(self, job: _Job) -> None:
        """The job's timer: past its deadline (a step may have moved it), the lane gives up on it."""
        if job.ended:
            return
        left = job.deadline - time.monotonic()
        if left > 0:
            job.timer = asyncio.get_running_loop().call_later(left, self._check, job)
        else:
            self._overran(job)

    def _overran(self, late: _Job) -> None:
        """``late`` is past its deadline: its worker is given up, with the call its thread is inside."""
        lane, worker = late.lane, late.worker
        inside = [job for job in list(worker.jobs) if not job.take()]  # the rest never run now
        running = inside[0] if inside else None
        hung = running or late
        name, started, limit = hung.hung()
        overran = time.monotonic() - started
        since, wait = self.clock() - overran, 0.0
        if worker.background:
            stuck = lane.background_hung = StuckCall(name, lane.key, since, float("inf"), 1, limit)
            lane.background = None
        else:
            previous = lane.stuck
            attempts = previous.attempts + 1 if previous is not None else 1
            wait = self.retry_backoff.after(attempts)
            since = previous.since if previous is not None else since
            stuck = lane.stuck = StuckCall(name, lane.key, since, self.clock() + wait, attempts, limit)
            lane.worker = None
        worker.stop()  # its thread ends once the call returns
        if running is not None:
            running.given_up = True
            lane.abandoned += 1
        timeout = ChipCallTimeout(name, lane.key, limit)
        refused = LaneStuck(stuck, self.clock(), until_it_returns=True)
        for job in list(worker.jobs):
            self._end(job, timeout if job is hung or job is late else refused)
        self._report(hung, name, overran, "timeout")
        if name != hung.name:  # a step overran: the whole call too
            self._observe(hung.name, time.monotonic() - hung.queued, "timeout")
        self._wake_drain()
        if not worker.background:
            log.error(
                "driver call %s on %s did not return within %g s; %s, retrying in %.0f s",
                name,
                lane_name(lane.key),
                limit,
                "the plugin is not ready" if lane.key is None else "the chip is marked unhealthy",
                wait,
                extra={"call": name, "lane": lane_name(lane.key), "attempt": stuck.attempts},
            )
            self._notify(lane.key, stuck)

    def _returned(self, lane: _Lane, worker: _Worker, job: _Job) -> None:
        """An abandoned call came back: a place under the caps is free, and the lane answers again."""
        lane.abandoned -= 1
        if self._closed:
            return
        for other in self._lanes.values():  # the process's cap may have held them back
            if (
                other is not lane
                and other.stuck is not None
                and other.abandoned < self.max_abandoned_per_lane
            ):
                self._notify(other.key, other.stuck)
        if worker.background:
            lane.background_hung = None
        elif lane.stuck is not None:
            log.warning(
                "stuck driver call %s on %s returned after %.1f s",
                job.name,
                lane_name(lane.key),
                lane.stuck.stuck_for(self.clock()),
                extra={"call": job.name, "lane": lane_name(lane.key)},
            )
            lane.stuck = None
            self._notify(lane.key, None)

    def _end(self, job: _Job, error: BaseException | None = None) -> None:
        """The job no longer holds its lane: answered by its thread, or ended with ``error`` without it."""
        job.settle(error)
        if error is not None and job.round is not None:
            job.round.lose(job)
        if job in job.worker.jobs:
            job.worker.jobs.remove(job)
        self._wake_drain()

    def _report(self, job: _Job, name: str, seconds: float, outcome: str) -> None:
        for failed in job.failed:
            self._observe(*failed)
        self._observe(name, seconds, outcome)

    def _notify(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        for listener in list(self._listeners):
            listener(lane, stuck)

    def _observe(self, name: str, seconds: float, outcome: str) -> None:
        for observer in self._observers:
            observer(name, seconds, outcome)

    # -- shutting down ---------------------------------------------------------------

    def _wake_drain(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    async def drain_chip_lanes(self) -> bool:
        """Refuse new chip calls and wait for those in flight; True when no thread of ours is left inside.

        The library may be unloaded (``close``, on the node lane) only then:
        unloading it under a chip's call would crash the process when that call
        returns. A call in flight ends by its deadline at the latest, so this
        waits one call timeout at most; False at once while a call hangs.
        """
        self._chips_closed = True
        said = False
        while not self.abandoned_threads and (flight := self._in_flight()):
            if not said:
                log.info(
                    "waiting up to %.1f s for driver calls in flight before closing the chip library: %s",
                    max(max(job.deadline for job in flight) - time.monotonic(), 0.0),
                    ", ".join(f"{job.name} on {lane_name(job.lane.key)}" for job in flight),
                )
                said = True
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain
        if hung := [lane.stuck or lane.background_hung for lane in self._lanes.values() if lane.abandoned]:
            log.warning(
                "calls still hang inside the chip library, their threads left behind: %s",
                "; ".join(call.describe(self.clock()) for call in hung if call is not None),
            )
        return self.abandoned_threads == 0

    def _in_flight(self) -> list[_Job]:
        """The chip calls queued and not answered yet (each ends by its deadline)."""
        lanes = [lane for lane in self._lanes.values() if lane.key is not NODE]
        return [
            job
            for lane in lanes
            for worker in (lane.worker, lane.background)
            if worker
            for job in worker.jobs
        ]

    def shutdown(self) -> None:
        """Refuse every call from now on, those not started too; each thread ends after its current call."""
        self._closed = True
        for lane in self._lanes.values():
            for worker in (lane.worker, lane.background):
                for job in list(worker.jobs if worker is not None else ()):
                    if job.take():
                        self._end(job, ChipCallError(f"driver call {job.name} refused: shutting down"))
                if worker is not None:
                    worker.stop()
            lane.worker = lane.background = None
