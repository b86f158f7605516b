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


class StreamSight:
    """What one open stream has shown: the version of the state its last look sent (or found unchanged)."""

    def __init__(self, streams: OpenStreams) -> None:
        self.version = -1
        self._streams = streams

    def showed(self, version: int) -> None:
        """The stream's look at ``version`` of the state reached the kubelet (or had nothing new)."""
        if version > self.version:
            self.version = version
            self._streams.sights_moved()


class OpenStreams:
    """Counts the open streams, wakes them on :meth:`changed`, ends them on :meth:`stop`."""

    def __init__(self) -> None:
        self.count = 0
        self.stopping = False
        self._changes = Changes()
        self._none_open = anyio.Event()
        self._none_open.set()
        self._sights: list[StreamSight] = []
        self._sights_moved = Changes()

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
    def open(self) -> Iterator[StreamSight]:
        """Count one stream as open for the duration of the block; it reports what it showed on the sight."""
        self.count += 1
        if self._none_open.is_set():
            self._none_open = anyio.Event()
        sight = StreamSight(self)
        self._sights.append(sight)
        try:
            yield sight
        finally:
            self._sights.remove(sight)
            self.sights_moved()
            self.count -= 1
            if self.count == 0:
                self._none_open.set()

    def sights_moved(self) -> None:
        """A stream showed a newer state, or one ended: whoever waits in :meth:`shown` looks again."""
        self._sights_moved.bump()

    async def shown(self, version: int) -> None:
        """Return once every open stream has shown ``version`` of the state or a later one.

        With no stream open there is nobody to tell, and a stream opened later
        starts from the state as it is then: that returns at once, as does
        stopping.
        """
        while not self.stopping and any(sight.version < version for sight in self._sights):
            await self._sights_moved.wait_for_change(self._sights_moved.version)

    async def ended(self) -> None:
        """Return once no stream is open."""
        await self._none_open.wait()
