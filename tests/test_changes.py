"""The change notifier: a waiter never sleeps through a change, nor past the close."""

from __future__ import annotations

import anyio
import pytest
from waiting import WAIT

from ascend_plugin.changes import Changes

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
