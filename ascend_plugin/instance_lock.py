"""InstanceLock: one plugin per served directory (during a rollout the old pod may still be running).

A ``flock`` on the directory itself (a lock file could be deleted under its holder); :data:`HOLDER_NOTE`.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from ascend_plugin.files import make_directory, write_atomically
from ascend_plugin.path_facts import PathUnusable, create_failure, ownership
from ascend_plugin.resilience import Backoff, Retrier

log = logging.getLogger(__name__)

HOLDER_NOTE = "ascend-device-plugin.pid"
# How often to try the lock while another instance holds it: soon after it is released, cheaply.
LOCK_POLL = Backoff(0.02, 0.25)
# When to say again that we are still waiting.
WAIT_REMINDERS = Backoff(10.0, 60.0)
# Retrying a directory that cannot be created or opened.
OPEN_BACKOFF = Backoff(0.5, 30.0)


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as its note says."""

    pid: int
    host: str
    since: float  # time.time() when it took the lock

    def describe(self) -> str:
        """``pid 4242 (host ascend-device-plugin-x7k2p, since 2026-12-01T21:40:03Z)``."""
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
        return f"pid {self.pid} (host {self.host}, since {since})"


def read_note(note: Path) -> Holder | None:
    """The holder note at ``note``; None when there is none or it cannot be read."""
    try:
        data = json.loads(note.read_text(encoding="utf-8"))
        return Holder(int(data["pid"]), str(data["host"]), float(data["since"]))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


@dataclass(frozen=True)
class LockState:
    """Whether some instance holds the lock on a directory now, and who, as its note says."""

    held: bool
    holder: Holder | None  # None when free, or held by a process that left no note


def lock_state(directory: Path) -> LockState:
    """Look at the lock on ``directory`` without waiting (for ``doctor``): a shared lock taken and dropped
    at once. PathUnusable when the directory cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise PathUnusable(f"cannot open {directory} to look at its lock ({error.strerror})") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return LockState(held=True, holder=read_note(directory / HOLDER_NOTE))
    finally:
        os.close(fd)  # closing drops the shared lock, if it was granted
    return LockState(held=False, holder=None)


class InstanceLock:
    """An exclusive lock on the device-plugin directory for this process."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.note = directory / HOLDER_NOTE
        self.clock = clock
        self.held = False
        self.waiting_since: float | None = None
        self.holder: Holder | None = None  # the other instance we wait for, as last read
        self._open_retry = Retrier(f"the lock on {directory}", OPEN_BACKOFF, logger=log)
        self._fd: int | None = None
        self._me = Holder(os.getpid(), socket.gethostname(), time.time())

    @property
    def problem(self) -> str:
        """Why the directory cannot be locked at all, while that lasts."""
        return self._open_retry.problem

    def status(self) -> str:
        """What the lock is doing, for readiness: held, or whom we have been waiting for and how long."""
        if self.held:
            return f"holding the lock on {self.directory}"
        if self.problem:
            return self.problem
        if self.waiting_since is None:
            return f"not yet locking {self.directory}"
        waited = self.clock() - self.waiting_since
        holder = self.holder.describe() if self.holder is not None else "another process (no holder note)"
        return f"waiting for the lock held by {holder} for {waited:.0f} s"

    async def acquire(self) -> None:
        """Return holding the lock, waiting while another instance has it (holding it already: at once, as
        a second descriptor of ours would wait for the first forever)."""
        if self.held:
            return
        fd = await self._open_with_retries()
        attempt = 0
        reminders = 0
        next_reminder = 0.0
        try:
            while not self._try_lock(fd):
                now = self.clock()
                if self.waiting_since is None:
                    self.waiting_since = now
                self.holder = read_note(self.note)
                if now >= next_reminder:
                    self._log_waiting(now - self.waiting_since)
                    reminders += 1
                    next_reminder = now + WAIT_REMINDERS.after(reminders)
                attempt += 1
                await anyio.sleep(LOCK_POLL.after(attempt))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.held = True
        if self.waiting_since is not None:
            waited = self.clock() - self.waiting_since
            log.info(
                "took the lock on %s after waiting %.1f s", self.directory, waited, extra={"waited": waited}
            )
        self.waiting_since = None
        self.holder = None
        self.keep_note()

    def keep_note(self) -> None:
        """(Re)write our holder note if it is missing or not ours; best effort, the lock does not need it."""
        if not self.held or read_note(self.note) == self._me:
            return
        note = {"pid": self._me.pid, "host": self._me.host, "since": self._me.since}
        try:
            write_atomically(self.note, json.dumps(note) + "\n")
        except OSError as error:
            log.debug("cannot write the holder note %s: %s", self.note, error.strerror)

    def release(self) -> None:
        """Give the lock up (the note first: nobody else writes it while we hold the lock)."""
        if self._fd is None:
            return
        if read_note(self.note) == self._me:
            self.note.unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        self.held = False

    async def _open_with_retries(self) -> int:
        """The directory, opened for locking; a failure is logged once and retried with backoff."""
        while True:
            try:
                fd = self._open()
            except PathUnusable as error:  # the directory cannot be created or opened
                await self._open_retry.wait_after(str(error))
                continue
            if self._open_retry.succeeded():
                log.info("%s can be locked again", self.directory)
            return fd

    def _open(self) -> int:
        try:
            make_directory(self.directory)
        except OSError as error:
            failed = Path(error.filename) if error.filename else self.directory
            raise PathUnusable(create_failure(failed, error)) from error
        try:
            return os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise PathUnusable(
                f"cannot open {self.directory} to lock it ({error.strerror}): "
                f"it is {ownership(self.directory)}"
            ) from error

    @staticmethod
    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _log_waiting(self, waited: float) -> None:
        holder = self.holder.describe() if self.holder is not None else "another process (no holder note)"
        log.warning(
            "another instance of the plugin serves %s: waiting for the lock held by %s (waited %.0f s); "
            "this instance takes over when that one exits",
            self.directory,
            holder,
            waited,
            extra={
                "holder_pid": self.holder.pid if self.holder else None,
                "holder_host": self.holder.host if self.holder else None,
                "waited": round(waited, 1),
            },
        )
