"""OpenStreams: the server streams of one service, told of every change and ended together.

Each stream takes the next change (:meth:`OpenStreams.next_change`) before it reads the state, and says
which version it has shown the kubelet, so a part that must know the kubelet was told (a hot reset) can
wait for it (:meth:`OpenStreams.shown`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from ascend_plugin.changes import Changes


class ShownVersion:
    """The version of the state one open stream last sent (or found unchanged)."""

    def __init__(self, streams: OpenStreams) -> None:
        self.version = -1
        self._streams = streams

    def showed(self, version: int) -> None:
        """The stream's look at ``version`` of the state reached the kubelet (or had nothing new)."""
        if version > self.version:
            self.version = version
            self._streams.shown_moved.bump()


class OpenStreams:
    """The open streams: woken on :meth:`changed`, ended on :meth:`stop`."""

    def __init__(self) -> None:
        self.stopping = False
        self._changes = Changes()
        self._open: list[ShownVersion] = []
        self.shown_moved = Changes()  # a stream showed a newer state, or ended

    @property
    def count(self) -> int:
        return len(self._open)

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
    def open(self) -> Iterator[ShownVersion]:
        """Count one stream as open for the duration of the block; it reports what it showed."""
        shown = ShownVersion(self)
        self._open.append(shown)
        try:
            yield shown
        finally:
            self._open.remove(shown)
            self.shown_moved.bump()

    async def shown(self, version: int) -> None:
        """Return once every open stream has shown ``version`` of the state or a later one (at once with
        none open, since a stream opened later starts from the state as it is then, or when stopping)."""
        while not self.stopping and any(shown.version < version for shown in self._open):
            await self.shown_moved.wait_for_change(self.shown_moved.version)

    async def ended(self) -> None:
        """Return once no stream is open."""
        while self._open:
            await self.shown_moved.wait_for_change(self.shown_moved.version)
