"""Every chip-library call runs here: on its lane's worker thread, with a deadline.

DCMI calls block, for seconds or forever when a card wedges. Each chip has a *lane* (one more for node-wide
calls): a thread running its calls in order, so a hung call holds up its own chip only. A call's deadline
counts from when it was queued and is kept by the lane, whoever waits: past it the lane is *stuck* and its
thread abandoned, until a retry (backed off, within caps of abandoned threads). Background calls (telemetry)
have a second lane per chip, which health calls never wait for. How it works: ARCHITECTURE.md "The chip lane".
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
CallObserver = Callable[[str, float, str], None]  # (name, seconds, "ok", a DCMI code, "timeout", "stuck"...)
LaneListener = Callable[[LaneKey, "StuckCall | None"], None]

RETRY_BACKOFF = Backoff(1.0, 60.0)
MAX_ABANDONED_PER_LANE = 2
MAX_ABANDONED = 32
TURN_LIMIT = 0.1  # seconds a round may take in turn; then the calls left start side by side


def call_outcome(error: BaseException) -> str:
    """How the observers name a failed call: its DCMI code, or the exception's class."""
    code = getattr(error, "code", None)
    return str(code) if isinstance(code, int) else type(error).__name__


def lane_name(key: LaneKey) -> str:
    """How logs and metrics name a lane."""
    return "node" if key is None else f"chip {key}"


def hand_to_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[*Ts], object], *args: *Ts) -> bool:
    """Run ``callback(*args)`` on ``loop`` soon, from any thread; once the loop closed (a call abandoned at
    shutdown returns, one more fault event), nobody waits: False, and no traceback."""
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
    """Root of the call errors: past its deadline, or refused; the library's own errors pass through."""


class ChipCallTimeout(ChipCallError):
    """The call overran its deadline; it keeps running on its abandoned thread."""

    def __init__(self, name: str, lane: LaneKey, timeout: float) -> None:
        self.name, self.lane, self.timeout = name, lane, timeout
        super().__init__(f"driver call {name} on {lane_name(lane)} did not return within {timeout:g} s")


class LaneStuck(ChipCallError):
    """The lane refuses the call: a call of it hangs, and no retry is due."""

    def __init__(self, stuck: StuckCall, now: float, *, until_it_returns: bool) -> None:
        when = "once a hung call returns" if until_it_returns else f"in {max(stuck.retry_at - now, 0):.0f} s"
        super().__init__(f"{stuck.describe(now)}; next try {when}")
        self.stuck = stuck


_running = threading.local()  # .job: the call this lane thread runs


def step(name: str, function: Callable[[*Ts], T], *args: *Ts, longer: float = 0.0) -> T:
    """One of several library calls made in one hand-off to a lane (a telemetry round), named on its own:
    held to the call's timeout from its own start (``longer`` more for one that samples), named by a
    timeout, and by the observers when it fails. Outside a lane's thread, a plain call."""
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
        job.under_way, job.deadline = None, time.monotonic() + job.limit


class _Job:
    """One call: what it runs, where, its deadline (time.monotonic()), and its answer on the loop."""

    def __init__(
        self, worker: _Worker, name: str, run: Callable[[], Any], limit: float, round: _Round
    ) -> None:
        self.worker, self.lane, self.round = worker, worker.lane, round
        self.name, self.run, self.limit = name, run, limit
        self.queued = time.monotonic()
        self.deadline = self.queued + limit  # each step moves it
        self.started = self.seconds = 0.0
        self.under_way: tuple[str, float, float] | None = None  # the step running: name, start, limit
        self.failed: list[tuple[str, float, str]] = []  # steps that failed: name, seconds, outcome
        self.result: Any = None
        self.error: BaseException | None = None
        self.answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None
        self.ended = self.given_up = False  # on the loop; given up: past its deadline, thread abandoned
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
            _running.job, self.seconds = None, time.monotonic() - self.started

    def settle(self, error: BaseException | None) -> None:
        """On the loop: the job has ended; its caller gets ``error``, or else its thread's answer."""
        self.ended = True
        if self.timer is not None:
            self.timer.cancel()
        if self.answer.done():
            return  # the caller stopped waiting
        if (error := error or self.error) is not None:
            self.answer.set_exception(error)
        else:
            self.answer.set_result(self.result)


class _Worker:
    """A daemon thread running a lane's calls in order (a pool's threads, joined at exit, could hang it)."""

    _numbers = itertools.count()

    def __init__(self, lane: _Lane) -> None:
        self.lane = lane
        self.jobs: collections.deque[_Job] = collections.deque()  # queued and not ended (on the loop)
        self.queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: end the thread
        name = f"dcmi-{'node' if lane.key is None else f'chip{lane.key}'}{'-background' * lane.background}"
        threading.Thread(target=self._run, name=f"{name}-{next(self._numbers)}", daemon=True).start()

    def _run(self) -> None:
        while (job := self.queue.get()) is not None:
            if job.take():  # else refused meanwhile: it only passes its round's turn on
                job.execute()
            job.round.ended(job)


class _Round:
    """Calls queued in one pass of the loop: handed to their threads one after another, answered together.

    Side by side, every chip's thread would wake at once and fight over the interpreter lock and the
    driver's (bench/idle.py, 8 chips: 107 wake-ups a second, against 24 in turn). Each call that ends
    hands the next to its thread, the last every answer to the loop. A round not done within ``limit``
    (a slow, hung or refused call) starts the calls left side by side, each answered alone.
    """

    def __init__(self, deliver: Callable[[list[_Job]], None], limit: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._deliver, self._limit = deliver, limit
        self._lock = threading.Lock()
        self.waiting: collections.deque[_Job] = collections.deque()
        self._holder: _Job | None = None
        self._answered: list[_Job] | None = []  # None once done or broken up: each then answered alone
        self._watchdog: asyncio.TimerHandle | None = None
        self.started = False

    def start(self) -> None:
        """On the loop, once the pass that queued the calls is over."""
        self.started = True
        with self._lock:
            first, _ = self._pass_on(None)
        if first is not None:
            first.worker.queue.put(first)
            self._watchdog = self._loop.call_later(self._limit, self._break_up)

    def ended(self, job: _Job) -> None:
        """On the job's thread: the next takes the turn; the last hands every answer to the loop."""
        with self._lock:
            answered = self._answered if job is self._holder else None  # None: it lost its turn
            if answered is not None:
                answered.append(job)
            following, answers = self._pass_on(job)
        if following is not None:
            following.worker.queue.put(following)
        if answered is None:
            hand_to_loop(self._loop, self._deliver, [job])
        elif answers is not None:
            hand_to_loop(self._loop, self._finish, answers)

    def _pass_on(self, job: _Job | None) -> tuple[_Job | None, list[_Job] | None]:
        """With the lock held, ``job`` leaves the turn: the next holder, and all answers once none is."""
        if job is not self._holder:
            return None, None
        self._holder = self.waiting.popleft() if self.waiting else None
        if self._holder is not None or self._answered is None:
            return self._holder, None
        answers, self._answered = self._answered, None
        return None, answers

    def _break_up(self) -> None:
        """The round overran ``limit``: the calls left start at once, side by side."""
        with self._lock:
            left, self.waiting = list(self.waiting), collections.deque()
            answers, self._answered, self._holder = self._answered or [], None, None
        for job in left:
            job.worker.queue.put(job)
        self._deliver(answers)

    def _finish(self, answers: list[_Job]) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._deliver(answers)


@dataclass(eq=False)
class _Lane:
    key: LaneKey
    background: bool  # a chip's second lane, for background calls
    worker: _Worker | None = None
    stuck: StuckCall | None = None
    abandoned: int = 0  # threads of this lane still inside a call that overran


class ChipCalls:
    """Runs blocking library calls on per-lane worker threads, each with a deadline."""

    def __init__(
        self,
        timeout: float,
        *,
        retry_backoff: Backoff = RETRY_BACKOFF,
        max_abandoned: int = MAX_ABANDONED,
        turn_limit: float = TURN_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout, self.turn_limit, self.retry_backoff = timeout, turn_limit, retry_backoff
        self.max_abandoned = max_abandoned
        self.clock = clock
        self._lanes: dict[tuple[LaneKey, bool], _Lane] = {}  # by key and background
        self._listeners: list[LaneListener] = []
        self._observers: list[CallObserver] = []
        self._closed = self._chips_closed = False  # chips closed: only node-wide calls (draining)
        self._forming: _Round | None = None  # the round calls of this pass of the loop join
        self._drain: asyncio.Future[None] | None = None  # woken when a call ends while draining

    def stuck_calls(self) -> list[StuckCall]:
        """Every lane's stuck call, node-wide first, then by chip (background calls are no lane's)."""
        stuck = [lane.stuck for lane in self._lanes.values() if lane.stuck and not lane.background]
        return sorted(stuck, key=lambda call: (call.lane is not None, call.lane or 0))

    def stuck(self, lane: LaneKey) -> StuckCall | None:
        found = self._lanes.get((lane, False))
        return found.stuck if found is not None else None

    def next_try(self, lane: LaneKey) -> float | None:
        """When (this clock) the stuck lane may retry; None if not stuck, or capped (until a call returns)."""
        found = self._lanes.get((lane, False))
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

    async def call(
        self,
        lane: LaneKey,
        name: str,
        function: Callable[[*Ts], T],
        *args: *Ts,
        within: float | None = None,
        background: bool = False,
    ) -> T:
        """``function(*args)`` on ``lane``'s thread within ``within`` s (the timeout), else ChipCallTimeout;
        LaneStuck when the lane takes no call. ``background``: on the chip's second lane, which refuses
        calls while one of its calls hangs, and whose hangs never touch the chip's health."""
        if self._closed or (self._chips_closed and lane is not NODE):
            raise ChipCallError(f"driver call {name} on {lane_name(lane)} refused: shutting down")
        state = self._lanes.setdefault((lane, background), _Lane(lane, background))
        worker = self._worker(state)
        limit = self.timeout if within is None else within
        loop = asyncio.get_running_loop()
        if self._forming is None or self._forming.started:
            self._forming = _Round(self._answer, self.turn_limit)
            loop.call_soon(self._forming.start)
        job = _Job(worker, name, functools.partial(function, *args), limit, self._forming)
        job.timer = loop.call_later(limit, self._check, job)
        worker.jobs.append(job)
        self._forming.waiting.append(job)
        try:
            return cast(T, await job.answer)
        except asyncio.CancelledError:
            if job.take():  # not started: nobody wants it any more
                self._end(job, ChipCallError(f"driver call {name} withdrawn: its caller stopped waiting"))
            raise  # started: it runs on, held to its deadline all the same

    def _worker(self, lane: _Lane) -> _Worker:
        """Where a call of ``lane`` goes; LaneStuck while it (or its chip's lane) is stuck, no retry due."""
        chip = self._lanes.get((lane.key, False)) if lane.background else None
        hung = lane.stuck or (chip.stuck if chip is not None else None)
        if hung is not None and (lane.worker is None or lane.background):
            now, capped = self.clock(), lane.background or self._capped(lane)
            if capped or now < hung.retry_at:
                if not lane.background:
                    self._observe(hung.name, 0.0, "stuck")
                raise LaneStuck(hung, now, until_it_returns=capped)
        lane.worker = lane.worker or _Worker(lane)
        return lane.worker

    def _capped(self, lane: _Lane) -> bool:
        """Whether the lane may start no thread: it, or the process, holds all the abandoned ones it may."""
        return lane.abandoned >= MAX_ABANDONED_PER_LANE or self.abandoned_threads >= self.max_abandoned

    def _answer(self, jobs: list[_Job]) -> None:
        """Calls their threads are done with: answer the callers, count abandoned threads back."""
        for job in jobs:
            lane = job.lane
            if job.given_up:
                self._returned(lane, job)
            elif not job.ended:
                self._end(job, None)
                outcome = "ok" if job.error is None else call_outcome(job.error)
                self._report(job, job.name, job.seconds, outcome)
                if job.worker is lane.worker and lane.stuck is not None:  # an answer, error or not
                    log.warning("driver calls on %s answer again", lane_name(lane.key))
                    lane.stuck = None
                    self._notify(lane.key, None)

    def _check(self, job: _Job) -> None:
        """The job's timer: past its deadline (a step may have moved it), the lane gives up on it."""
        if not job.ended and (left := job.deadline - time.monotonic()) > 0:
            job.timer = asyncio.get_running_loop().call_later(left, self._check, job)
        elif not job.ended:
            self._overran(job)

    def _overran(self, late: _Job) -> None:
        """``late`` is past its deadline: its worker is given up, with the call its thread is inside."""
        lane, worker = late.lane, late.worker
        inside = [job for job in list(worker.jobs) if not job.take()]  # the others never run now
        hung = inside[0] if inside else late
        name, started, limit = hung.under_way or (hung.name, hung.started or hung.queued, hung.limit)
        overran, previous = time.monotonic() - started, lane.stuck
        attempts = previous.attempts + 1 if previous is not None else 1
        wait = float("inf") if lane.background else self.retry_backoff.after(attempts)
        since = previous.since if previous is not None else self.clock() - overran
        stuck = lane.stuck = StuckCall(name, lane.key, since, self.clock() + wait, attempts, limit)
        lane.worker = None
        worker.queue.put(None)  # its thread ends once the call returns
        hung.given_up, lane.abandoned = bool(inside), lane.abandoned + len(inside)
        refused = LaneStuck(stuck, self.clock(), until_it_returns=True)
        for job in list(worker.jobs):
            self._end(job, ChipCallTimeout(name, lane.key, limit) if job in (hung, late) else refused)
        self._report(hung, name, overran, "timeout")
        if name != hung.name:  # a step overran: the whole call too
            self._observe(hung.name, time.monotonic() - hung.queued, "timeout")
        if not lane.background:
            effect = "the plugin is not ready" if lane.key is None else "the chip is marked unhealthy"
            log.error(
                "driver call %s on %s did not return within %g s; %s, retrying in %.0f s",
                *(name, lane_name(lane.key), limit, effect, wait),
                extra={"call": name, "lane": lane_name(lane.key), "attempt": attempts},
            )
            self._notify(lane.key, stuck)

    def _returned(self, lane: _Lane, job: _Job) -> None:
        """An abandoned call came back: a place under the caps is free, and its lane answers again."""
        lane.abandoned -= 1
        if self._closed:
            return
        for other in self._lanes.values():  # the process's cap may have held them back
            if other is not lane and other.stuck and not other.background and not self._capped(other):
                self._notify(other.key, other.stuck)
        if lane.stuck is not None and not lane.background:
            log.warning(
                "stuck driver call %s on %s returned after %.1f s",
                *(job.name, lane_name(lane.key), lane.stuck.stuck_for(self.clock())),
                extra={"call": job.name, "lane": lane_name(lane.key)},
            )
            self._notify(lane.key, None)
        lane.stuck = None

    def _end(self, job: _Job, error: BaseException | None) -> None:
        """The job no longer holds its lane: answered by its thread (no ``error``), or ended without it."""
        job.settle(error)
        if job in job.worker.jobs:
            job.worker.jobs.remove(job)
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _report(self, job: _Job, name: str, seconds: float, outcome: str) -> None:
        for failed in (*job.failed, (name, seconds, outcome)):
            self._observe(*failed)

    def _notify(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        for listener in list(self._listeners):
            listener(lane, stuck)

    def _observe(self, name: str, seconds: float, outcome: str) -> None:
        for observer in self._observers:
            observer(name, seconds, outcome)

    async def drain_chip_lanes(self) -> bool:
        """Refuse new chip calls, wait for those in flight (one timeout at most: each ends by its deadline);
        True when no thread is inside the library, which only then may be closed (else a crash)."""
        self._chips_closed = True
        lanes = [lane for lane in self._lanes.values() if lane.key is not NODE]
        if flight := [job for lane in lanes if lane.worker for job in lane.worker.jobs]:
            left = max(max(job.deadline for job in flight) - time.monotonic(), 0.0)
            names = ", ".join(f"{job.name} on {lane_name(job.lane.key)}" for job in flight)
            log.info(
                "waiting up to %.1f s for driver calls in flight before closing the library: %s", left, names
            )
        while not self.abandoned_threads and any(lane.worker and lane.worker.jobs for lane in lanes):
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain
        now = self.clock()
        if hung := [
            lane.stuck.describe(now) for lane in self._lanes.values() if lane.abandoned and lane.stuck
        ]:
            log.warning(
                "calls still hang inside the chip library, their threads left behind: %s", "; ".join(hung)
            )
        return self.abandoned_threads == 0

    def shutdown(self) -> None:
        """Refuse every call from now on, those not started too; each thread ends after its current call."""
        self._closed = True
        for lane in self._lanes.values():
            for job in list(lane.worker.jobs if lane.worker else ()):
                if job.take():
                    self._end(job, ChipCallError(f"driver call {job.name} refused: shutting down"))
            if lane.worker is not None:
                lane.worker.queue.put(None)
                lane.worker = None
