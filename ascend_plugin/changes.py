"""Changes: a count of changes to some state, and a way to sleep until the next one.

Many parts keep a piece of state that others follow: the inventory's chips, the
assignments, the pods the Volcano face sees, the open streams of a service, the
files of the device-plugin directory. Each reader looks at the state, then
sleeps until it changes, then looks again. Two rules make that safe:

* the version is read (or the event taken) *before* the state is looked at, so
  a change that lands between the look and the sleep is never slept through;
* the event a waiter sleeps on is replaced on every change, so a waiter never
  wakes for a change it has already seen, and nothing accumulates.

:meth:`Changes.close` wakes every waiter for good: a part that stops must not
leave its followers asleep.
"""

from __future__ import annotations

import anyio


class Changes:
    """A version that increases on every change, and waits for the next one."""

    def __init__(self) -> None:
        self._version = 0
        self._closed = False
        self._next = anyio.Event()

    @property
    def version(self) -> int:
        """Increases on every :meth:`bump` (and on :meth:`close`)."""
        return self._version

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: waits return at once from then on."""
        return self._closed

    def bump(self) -> None:
        """Something changed: count it and wake whoever waits."""
        self._version += 1
        woken, self._next = self._next, anyio.Event()
        if self._closed:
            self._next.set()  # closed: whoever takes the next event does not wait on it
        woken.set()

    def close(self) -> None:
        """Wake every waiter, now and from now on: the state will not change any more."""
        self._closed = True
        self.bump()

    def next_change(self) -> anyio.Event:
        """The event the next change sets (already set once closed): take it before looking at the state."""
        return self._next

    async def wait_for_change(self, seen_version: int) -> int:
        """The version, once it differs from ``seen_version`` (at once when closed)."""
        while self._version == seen_version and not self._closed:
            await self._next.wait()
        return self._version
