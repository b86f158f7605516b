"""Waiting in tests: for a condition, never for a moment.

A test that sleeps a fixed time is slow on an idle machine and flaky on a loaded
one; a test that looks at a condition until a deadline is neither. So every wait
in the tests is one of these:

* :func:`until` polls a condition on the event loop (async tests);
* :func:`eventually` polls it in the calling thread (tests of threads and
  processes), and gives up at once when ``unless`` says waiting is pointless
  (the process under test has died);
* :func:`wait_for` sleeps on a stand-in's own condition variable (the kubelet
  stand-ins notify on every change), off the event loop.

Each returns the condition's first truthy value and raises TimeoutError naming
``what`` once ``within`` seconds have passed; the deadline is generous (the
conditions normally hold within milliseconds), so only a real failure reaches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

WAIT = 15.0  # seconds: generous, a condition normally holds within milliseconds
POLL = 0.005  # seconds between two looks

T = TypeVar("T")


class _Deadline:
    """When a wait gives up, and the error it gives up with."""

    def __init__(self, what: str, within: float, explain: Callable[[], str] | None) -> None:
        self.what = what
        self.within = within
        self.explain = explain
        self.end = time.monotonic() + within

    def check(self) -> None:
        if time.monotonic() > self.end:
            detail = f"\n{self.explain()}" if self.explain is not None else ""
            raise TimeoutError(f"not within {self.within:g} s: {self.what}{detail}")


async def until(
    condition: Callable[[], T],
    what: str,
    *,
    within: float = WAIT,
    every: float = POLL,
    explain: Callable[[], str] | None = None,
) -> T:
    """``condition()``'s first truthy value, looked at every ``every`` s on the event loop."""
    deadline = _Deadline(what, within, explain)
    while not (value := condition()):
        deadline.check()
        await anyio.sleep(every)
    return value


def eventually(
    condition: Callable[[], T],
    what: str,
    *,
    within: float = WAIT,
    every: float = POLL,
    unless: Callable[[], str | None] | None = None,
    explain: Callable[[], str] | None = None,
) -> T:
    """``condition()``'s first truthy value, looked at every ``every`` s in this thread.

    ``unless`` returns why waiting on is pointless (or None): an AssertionError
    then says so at once instead of a timeout later. ``explain`` adds what a
    failure report should show (the log of the process under test).
    """
    deadline = _Deadline(what, within, explain)
    while not (value := condition()):
        if unless is not None and (reason := unless()) is not None:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"{reason} before: {what}{detail}")
        deadline.check()
        time.sleep(every)
    return value


async def wait_for(
    stand_in: KubeletStandIn | DraKubeletStandIn,
    condition: Callable[[Any], bool],
    what: str,
    *,
    within: float = WAIT,
) -> None:
    """Wait (off the event loop) until the kubelet stand-in satisfies ``condition``."""
    await anyio.to_thread.run_sync(stand_in.wait_until, condition, within, what)
