"""Changes: a count of changes to some state, and a wait for the next one.

A reader takes the version *before* it looks at the state, then waits for a version past it: a change
that lands between the look and the wait is never slept through. :meth:`Changes.close` wakes every
waiter for good. A wake-up flag is a ``Changes`` too (:meth:`Changes.bump` wakes, the version says
whether it did); :func:`first_change` waits for the first of several; a state others follow derives
from :class:`Followable`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Protocol

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


class Followed(Protocol):
    """Any state with a version and a wait for the next (a :class:`Changes`, or a part built on one)."""

    @property
    def version(self) -> int: ...

    async def wait_for_change(self, seen_version: int) -> int: ...


class Followable:
    """Base of a state others follow: the ``version`` and ``wait_for_change`` of its own :class:`Changes`."""

    def __init__(self) -> None:
        self._changes = Changes()

    @property
    def version(self) -> int:
        """Increases on every change."""
        return self._changes.version

    async def wait_for_change(self, seen_version: int) -> int:
        """The version, once it differs from ``seen_version`` (at once when closed)."""
        return await self._changes.wait_for_change(seen_version)


async def first_change(
    *seen: tuple[Followed, int],
    within: float = math.inf,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
) -> bool:
    """True once one of the ``(state, version seen)`` pairs moved on; False when ``within`` s passed first.

    ``sleep`` is how the time passes (a test may move it by hand).
    """
    if any(state.version != version for state, version in seen):
        return True
    changed = False
    async with anyio.create_task_group() as group:

        async def follow(state: Followed, version: int) -> None:
            nonlocal changed
            await state.wait_for_change(version)
            changed = True
            group.cancel_scope.cancel()

        async def time_passes() -> None:
            await sleep(within)
            group.cancel_scope.cancel()

        for state, version in seen:
            group.start_soon(follow, state, version)
        if within != math.inf:
            group.start_soon(time_passes)
    return changed
