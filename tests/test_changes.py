"""The change notifier: a waiter never sleeps through a change, nor past the close."""

from __future__ import annotations

import anyio
import pytest
from waiting import WAIT

from ascend_plugin.changes import Changes, first_change

pytestmark = pytest.mark.anyio


async def test_the_event_taken_after_the_close_is_already_set() -> None:
    changes = Changes()
    changes.close()
    event = changes.next_change()
    assert event.is_set()
    with anyio.fail_after(WAIT):
        await event.wait()
    changes.bump()  # a change after the close leaves it closed
    assert changes.next_change().is_set()


async def test_the_event_taken_before_the_close_is_set_by_it() -> None:
    changes = Changes()
    event = changes.next_change()
    assert not event.is_set()
    changes.close()
    assert event.is_set()
    assert await changes.wait_for_change(changes.version) == changes.version


async def test_an_open_notifier_sets_only_the_event_taken_before_the_change() -> None:
    changes = Changes()
    taken = changes.next_change()
    changes.bump()
    assert taken.is_set()
    assert not changes.next_change().is_set()


async def test_first_change_returns_at_the_first_of_several_changes() -> None:
    quiet, busy = Changes(), Changes()
    returned: list[bool] = []
    async with anyio.create_task_group() as tasks:

        async def wait() -> None:
            returned.append(await first_change((quiet, quiet.version), (busy, busy.version)))

        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        assert not returned  # nothing changed: it waits
        busy.bump()
    assert returned == [True]


async def test_first_change_counts_a_change_made_before_it_was_called() -> None:
    changes = Changes()
    seen = changes.version
    changes.bump()  # between the look at the state and the wait
    with anyio.fail_after(WAIT):
        assert await first_change((changes, seen), within=3600)


async def test_first_change_says_when_the_time_passed_first() -> None:
    changes = Changes()
    slept: list[float] = []

    async def moved_by_hand(seconds: float) -> None:
        slept.append(seconds)

    with anyio.fail_after(WAIT):
        assert not await first_change((changes, changes.version), within=45, sleep=moved_by_hand)
    assert slept == [45]
