"""Turns: lane jobs handed to their threads one after another, and their answers to the loop together.

Every chip has its own call thread (:mod:`ascend_plugin.chip_calls`), so that a
call that hangs holds up only its chip. But when the health poll of every chip
starts at once, every thread wakes at once and they fight over the interpreter
lock: each library call releases it and must win it back, and each lost round
is another sleep and wake-up of a thread. A node of 16 chips spent ten wake-ups
a second per chip that way, for two polls a second.

So jobs submitted *in turn* wait for each other: the first starts at once, and
each one that ends starts the next, from its own thread, without the loop. Only
when no job holds the turn any more are the answers handed to the event loop,
in one hand-off for all of them. A node's poll round is then one wake-up of each
chip's thread and one of the loop.

A job that holds the turn for :data:`TURN_LIMIT` seconds (a slow driver) loses
it: the next starts beside it, and the answers that waited are handed over. A
job whose call timed out loses it at once. Waiting therefore costs the other
chips at most a fraction of a poll, never the call timeout: a hung call still
holds up only its own chip.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVarTuple

TURN_LIMIT = 0.1  # seconds a job may hold the turn before the next one starts beside it

Ts = TypeVarTuple("Ts")

Wake = Callable[[], None]  # tells the job's waiting coroutine (on the loop) that the job ended


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


@dataclass(eq=False)
class Turn:
    """One job's place: waiting for the turn, holding it, or past it.

    Its two actions are dropped once one of them is done: they hold the job's
    result to come, which holds this turn (the end is told through it), and
    a cycle would keep every poll's objects until the garbage collector ran.
    """

    submit: Callable[[], None] | None  # hands the job to its lane's thread
    refuse: Callable[[], None] | None  # ends the job unstarted (shutdown)
    in_turn: bool  # False: started at once and answered at once, outside the turns

    def hand_over(self) -> None:
        """Give the job to its thread (once)."""
        submit, self.submit, self.refuse = self.submit, None, None
        if submit is not None:
            submit()

    def end_unstarted(self) -> None:
        """End the job without starting it (once)."""
        refuse, self.submit, self.refuse = self.refuse, None, None
        if refuse is not None:
            refuse()


class Turns:
    """Hands jobs to their threads one at a time, and their answers to ``loop`` together."""

    def __init__(self, limit: float = TURN_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._waiting: collections.deque[Turn] = collections.deque()
        self._holder: Turn | None = None
        self._held_since = 0.0  # time.monotonic() when the holder got the turn
        self._answered: list[Wake] = []  # wakes of jobs that ended, not handed to the loop yet
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchdog: asyncio.TimerHandle | None = None  # on the loop, from the first wait to a free turn
        self._beginning = False  # a free turn is to be taken at the end of the loop's pass (_begin)

    def start(self, turn: Turn) -> None:
        """Hand a job over now (not in turn), or once it has the turn. On the event loop.

        A free turn is taken at the end of this pass of the loop, not at once:
        the jobs that the same wake-up submits (every chip's poll at the tick)
        then all wait in line, and their answers come back in one hand-off. A
        first job started at once would often end before the loop had
        submitted the next, and be answered alone.
        """
        self._loop = asyncio.get_running_loop()
        if not turn.in_turn:
            turn.hand_over()
            return
        with self._lock:
            self._waiting.append(turn)
            begins = self._holder is None and not self._beginning
            self._beginning = self._beginning or begins
        if begins:
            self._loop.call_soon(self._begin)
        if self._watchdog is None:
            self._watchdog = self._loop.call_later(self.limit, self._check)

    def _begin(self) -> None:
        """The free turn to the first job in line (on the loop, after the pass that submitted it)."""
        with self._lock:
            self._beginning = False
            following = self._pass_on() if self._holder is None else None
        if following is not None:
            following.hand_over()

    def ended(self, turn: Turn, wake: Wake) -> None:
        """The job of ``turn`` ended (on its thread): pass the turn on, hand answers over when free."""
        with self._lock:
            self._answered.append(wake)
            following = self._pass_on() if turn is self._holder else None
            free = self._holder is None or not turn.in_turn
            wakes = self._take_answered() if free else []
        if following is not None:
            following.hand_over()
        if wakes:
            self._hand_over(wakes)

    def lose(self, turn: Turn) -> None:
        """The job's call timed out (on the loop): the turn passes on at once, its end is answered alone."""
        with self._lock:
            turn.in_turn = False
            following = self._pass_on() if turn is self._holder else None
            wakes = self._take_answered() if self._holder is None else []
        if following is not None:
            following.hand_over()
        for wake in wakes:
            wake()

    def refuse_waiting(self) -> None:
        """End every job still waiting for its turn without starting it (shutdown)."""
        with self._lock:
            waiting, self._waiting = list(self._waiting), collections.deque()
            for turn in waiting:
                turn.in_turn = False  # answered at once, not after the holder
        for turn in waiting:
            turn.end_unstarted()

    # -- with the lock held ---------------------------------------------------------------

    def _hold(self, turn: Turn) -> None:
        self._holder, self._held_since = turn, time.monotonic()

    def _pass_on(self) -> Turn | None:
        """The turn to the next waiting job (returned, to be started outside the lock), or free."""
        self._holder = None
        if not self._waiting:
            return None
        following = self._waiting.popleft()
        self._hold(following)
        return following

    def _take_answered(self) -> list[Wake]:
        wakes, self._answered = self._answered, []
        return wakes

    # -- on the loop ----------------------------------------------------------------------

    def _hand_over(self, wakes: list[Wake]) -> None:
        """From a thread: run ``wakes`` on the loop, in one hand-off."""
        assert self._loop is not None
        hand_to_loop(self._loop, self._wake_all, wakes)

    def _wake_all(self, wakes: list[Wake]) -> None:
        for wake in wakes:
            wake()
        with self._lock:
            idle = self._holder is None and not self._waiting
        if idle and self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _check(self) -> None:
        """While the turn is held: answers that waited are handed over; a holder past the limit loses it."""
        assert self._loop is not None
        self._watchdog = None
        now = time.monotonic()
        following = None
        with self._lock:
            wakes = self._take_answered()
            if self._holder is not None and now - self._held_since >= self.limit:
                self._holder.in_turn = False  # it ends when it ends, answered on its own
                following = self._pass_on()
            busy = self._holder is not None
            due = self._held_since + self.limit - now
        if following is not None:
            following.hand_over()
        for wake in wakes:
            wake()
        if busy:
            self._watchdog = self._loop.call_later(max(due, 0.0), self._check)
