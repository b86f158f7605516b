"""Backoff, retry and supervision: no failure ends the process, nor turns into a tight loop or a flood.

:class:`Retrier` says each problem once; :func:`supervise` restarts a failed part, recorded for the probes.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio

log = logging.getLogger(__name__)

Jitter = Callable[[], float]  # a number in [0, 1): where below its ceiling a delay falls


@dataclass(frozen=True)
class Backoff:
    """Delays that double from ``first`` up to ``cap`` seconds; ``jitter`` draws each below that ceiling
    (the DaemonSet's nodes do not retry in lockstep)."""

    first: float
    cap: float
    jitter: Jitter | None = None

    def ceiling(self, attempt: int) -> float:
        """The longest delay after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.first * 2.0 ** max(attempt - 1, 0), self.cap))

    def after(self, attempt: int) -> float:
        """The delay after failed attempt number ``attempt`` (1-based)."""
        ceiling = self.ceiling(attempt)
        return ceiling if self.jitter is None else ceiling * self.jitter()


PART_BACKOFF = Backoff(0.5, 30.0, jitter=random.random)
# Seconds a run must last without failing for a part that failed to count as serving again: its
# streak of failures ends (the probes) and its backoff starts again from the shortest delay.
RECOVERED_AFTER = 10.0

Part = Callable[[], Awaitable[None]]
# What keeps a part from its job now, one operator-worded line per cause; empty while it does its job.
Problems = Callable[[], Sequence[str]]


def describe(error: BaseException) -> str:
    """An error as an operator reads it: the plugin's own errors by their message, others with their type."""
    text = str(error)
    if text and type(error).__module__.split(".")[0] in ("ascend_plugin", "backends"):
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


Sleep = Callable[[float], Awaitable[None]]


class Retrier:
    """A part's failed attempts since it last got through; a problem is said at its level once, then DEBUG."""

    def __init__(
        self, part: str, backoff: Backoff, *, logger: logging.Logger = log, sleep: Sleep = anyio.sleep
    ) -> None:
        self.part = part
        self.backoff = backoff
        self.logger = logger
        self.sleep = sleep
        self.attempt = 0  # failed attempts since the last success
        self.failures = 0  # failed attempts in all
        self.problem = ""  # the last failure, as compared; empty once the part gets through

    def failure(self, problem: str, *, level: int = logging.ERROR, said: str = "", **fields: object) -> float:
        """Count a failed attempt at ``problem`` and say it (``said``: a fuller line); the delay."""
        self.attempt += 1
        self.failures += 1
        delay = self.backoff.after(self.attempt)
        self.logger.log(
            logging.DEBUG if problem == self.problem else level,
            "%s; retrying in %.1f s",
            said or problem,
            delay,
            extra={"part": self.part, "attempt": self.attempt, **fields},
        )
        self.problem = problem
        return delay

    async def wait_after(
        self, problem: str, *, level: int = logging.ERROR, said: str = "", **fields: object
    ) -> None:
        """Count and say a failed attempt (:meth:`failure`), then wait the backoff's delay."""
        await self.sleep(self.failure(problem, level=level, said=said, **fields))

    def succeeded(self) -> int:
        """The part got through: the backoff starts over. The failed attempts before it (0: none)."""
        attempts, self.attempt, self.problem = self.attempt, 0, ""
        return attempts


@dataclass(frozen=True)
class PartStatus:
    """One supervised part as its supervisor sees it now."""

    name: str
    running: bool  # False while it waits to restart after a failure
    failing_since: float | None  # the first failure since it last served; None while it serves
    last_error: str  # its last failure, in operator's words ("" if it never failed)
    restart_at: float | None  # when it is restarted, while it waits
    problems: Problems | None  # what the part says keeps it from its job, if it says

    def failing_for(self, now: float) -> float:
        """Seconds since the first failure of the current streak; 0 while it serves."""
        return 0.0 if self.failing_since is None else now - self.failing_since


@dataclass
class _Record:
    """The supervisor's notes on one part, written as it runs and fails."""

    name: str
    problems: Problems | None
    started_at: float | None = None  # the current run's start; None while waiting to restart
    failing_since: float | None = None
    last_error: str = ""
    restart_at: float | None = None

    def serving_again(self, now: float, recovered_after: float) -> bool:
        """The current run has lasted long enough to end the streak of failures."""
        return self.started_at is not None and now - self.started_at >= recovered_after


@dataclass
class Supervision:
    """Every part its supervisors run, in the order they started, with their state."""

    clock: Callable[[], float] = time.monotonic
    recovered_after: float = RECOVERED_AFTER
    _records: list[_Record] = field(default_factory=list)

    def parts(self) -> list[PartStatus]:
        """The supervised parts now."""
        now = self.clock()
        return [
            PartStatus(
                record.name,
                record.started_at is not None,
                None if record.serving_again(now, self.recovered_after) else record.failing_since,
                record.last_error,
                record.restart_at,
                record.problems,
            )
            for record in self._records
        ]

    def _failed(self, record: _Record, error: str, delay: float) -> None:
        now = self.clock()
        if record.failing_since is None or record.serving_again(now, self.recovered_after):
            record.failing_since = now
        record.started_at, record.last_error, record.restart_at = None, error, now + delay


_SUPERVISION: ContextVar[Supervision | None] = ContextVar("supervision", default=None)


async def supervise(
    name: str, part: Part, backoff: Backoff = PART_BACKOFF, problems: Problems | None = None
) -> None:
    """Run ``part`` until it returns, restarting it with backoff whenever it fails (recorded in the
    context's :class:`Supervision`); ``problems``: what keeps it from its job."""
    # Unsupervised callers (tests) keep a record nobody reads.
    supervision = _SUPERVISION.get() or Supervision()
    record = _Record(name, problems)
    supervision._records.append(record)
    attempt = 0
    try:
        while True:
            record.started_at, record.restart_at = supervision.clock(), None
            try:
                await part()
                return
            except Exception as error:
                if record.serving_again(supervision.clock(), supervision.recovered_after):
                    attempt = 0
                attempt += 1
                delay = backoff.after(attempt)
                supervision._failed(record, describe(error), delay)
                log.exception("%s failed; restarting it in %.1f s", name, delay, extra={"part": name})
                await anyio.sleep(delay)
    finally:
        supervision._records.remove(record)


@dataclass(frozen=True)
class RootTask:
    """A named long-running part of the plugin, how it says what keeps it from its job, its backoff."""

    name: str
    run: Part
    problems: Problems | None = None
    backoff: Backoff = PART_BACKOFF


async def run_root_tasks(tasks: Sequence[RootTask], supervision: Supervision | None = None) -> None:
    """Run every task supervised, side by side, recorded in ``supervision`` (else the caller's)."""
    token = _SUPERVISION.set(supervision) if supervision is not None else None
    try:
        async with anyio.create_task_group() as group:
            for task in tasks:
                group.start_soon(supervise, task.name, task.run, task.backoff, task.problems, name=task.name)
    finally:
        if token is not None:
            _SUPERVISION.reset(token)
