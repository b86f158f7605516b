"""OpenStreams: every open stream hears of each change, none sleeps through one, stop ends them all."""

from __future__ import annotations

import anyio
import pytest
from waiting import until

from ascend_plugin.streams import OpenStreams

pytestmark = pytest.mark.anyio


async def _follow(streams: OpenStreams, looks: list[int], state: list[int]) -> None:
    """A stream as the services run one: look, then wait for the next change, until stopped."""
    with streams.open():
        while not streams.stopping:
            changed = streams.next_change()
            looks.append(state[0])
            await changed.wait()


async def test_each_open_stream_looks_again_after_every_change() -> None:
    streams, state = OpenStreams(), [0]
    first: list[int] = []
    second: list[int] = []
    async with anyio.create_task_group() as group:
        group.start_soon(_follow, streams, first, state)
        group.start_soon(_follow, streams, second, state)
        await until(lambda: streams.count == 2 and len(first) == len(second) == 1, "two streams open")
        state[0] = 1
        streams.changed()
        await until(lambda: first[-1] == second[-1] == 1, "both streams see the change")
        streams.stop()
    assert first == second == [0, 1]
    assert streams.count == 0


async def test_a_change_between_the_look_and_the_wait_is_not_slept_through() -> None:
    streams = OpenStreams()
    changed = streams.next_change()  # taken before the look, as a stream does
    streams.changed()  # the change lands while the stream is still looking
    with anyio.fail_after(5):
        await changed.wait()  # already set: the stream looks again at once


async def test_ended_waits_for_the_last_stream_and_returns_at_once_when_none_is_open() -> None:
    streams, state, looks = OpenStreams(), [0], []
    with anyio.fail_after(5):
        await streams.ended()  # nothing open yet
    async with anyio.create_task_group() as group:
        group.start_soon(_follow, streams, looks, state)
        await until(lambda: streams.count == 1, "the stream open")
        ended = False

        async def wait_for_end() -> None:
            nonlocal ended
            await streams.ended()
            ended = True

        group.start_soon(wait_for_end)
        await anyio.wait_all_tasks_blocked()
        assert not ended
        streams.stop()
        await until(lambda: ended, "ended() returns once the stream has stopped")
    assert streams.count == 0


async def test_shown_waits_until_every_open_stream_showed_the_version() -> None:
    streams = OpenStreams()
    with anyio.fail_after(5):
        await streams.shown(7)  # nobody to tell
    shown: list[int] = []

    async def wait_shown(version: int) -> None:
        await streams.shown(version)
        shown.append(version)

    with streams.open() as first, streams.open() as second:
        first.showed(2)
        second.showed(5)
        async with anyio.create_task_group() as group:
            group.start_soon(wait_shown, 3)
            await anyio.wait_all_tasks_blocked()
            assert shown == []  # the first stream is behind
            first.showed(3)
            await until(lambda: shown == [3], "shown once both streams showed 3")


async def test_a_stream_that_ends_has_nothing_left_to_show() -> None:
    streams = OpenStreams()
    shown: list[int] = []
    opened = streams.open()
    lagging = opened.__enter__()
    lagging.showed(1)

    async def wait_shown() -> None:
        await streams.shown(4)
        shown.append(4)

    async with anyio.create_task_group() as group:
        group.start_soon(wait_shown)
        await anyio.wait_all_tasks_blocked()
        assert shown == []
        opened.__exit__(None, None, None)
        await until(lambda: shown == [4], "shown once the lagging stream ended")
