"""OpenStreams: the server streams of one service, told of every change and ended together.

ListAndWatch and the DRA health stream have the same life: each open stream
sends the current state, then waits for the next change and sends again, until
the service stops; and whoever stops the service waits until every stream has
ended, so the kubelet sees each one end cleanly. The waiting is on
:class:`~ascend_plugin.changes.Changes`: a stream takes the next change's event
*before* it reads the state, so a change between the read and the wait is never
slept through.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from ascend_plugin.changes import Changes


class OpenStreams:
    """Counts the open streams, wakes them on :meth:`changed`, ends them on :meth:`stop`."""

    def __init__(self) -> None:
        self.count = 0
        self.stopping = False
        self._changes = Changes()
        self._none_open = anyio.Event()
        self._none_open.set()

    def next_change(self) -> anyio.Event:
        """The event the next change sets: take it before reading the state, then wait on it."""
        return self._changes.next_change()

    def changed(self) -> None:
        """The state changed: every open stream looks again."""
        self._changes.bump()

    def stop(self) -> None:
        """End every stream: each returns at its next look."""
        self.stopping = True
        self.changed()

    @contextmanager
    def open(self) -> Iterator[None]:
        """Count one stream as open for the duration of the block."""
        self.count += 1
        if self._none_open.is_set():
            self._none_open = anyio.Event()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self._none_open.set()

    async def ended(self) -> None:
        """Return once no stream is open."""
        await self._none_open.wait()
