"""The one retrier: each distinct problem said once at its level, a repeat at DEBUG, the waits backed off."""

from __future__ import annotations

import logging

import pytest
from log_records import fields

from ascend_plugin.resilience import Backoff, Retrier

pytestmark = pytest.mark.anyio

PART = logging.getLogger("tests.retrier_part")


async def test_a_problem_is_said_once_a_new_one_again_and_the_backoff_starts_over_after_a_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, PART.name)
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    retry = Retrier("the part", Backoff(0.5, 2.0), logger=PART, sleep=sleep)
    for problem in ("disk full", "disk full", "disk full", "read-only file system"):
        await retry.wait_after(
            problem, level=logging.WARNING, said=f"{problem}: mount it writable", path="/x"
        )
    assert retry.succeeded() == 4
    await retry.wait_after("read-only file system")
    lines = [
        (r.levelno, r.getMessage(), fields(r, "attempt", "part", "path"))
        for r in caplog.records
        if r.name == PART.name
    ]
    said = {"part": "the part", "path": "/x"}
    assert lines == [
        (logging.WARNING, "disk full: mount it writable; retrying in 0.5 s", {"attempt": 1, **said}),
        (logging.DEBUG, "disk full: mount it writable; retrying in 1.0 s", {"attempt": 2, **said}),
        (logging.DEBUG, "disk full: mount it writable; retrying in 2.0 s", {"attempt": 3, **said}),
        (
            logging.WARNING,
            "read-only file system: mount it writable; retrying in 2.0 s",
            {"attempt": 4, **said},
        ),
        # After a success: the same problem is new again, at the default level, the backoff from the start.
        (logging.ERROR, "read-only file system; retrying in 0.5 s", {"attempt": 1, "part": "the part"}),
    ]
    assert slept == [0.5, 1.0, 2.0, 2.0, 0.5]
    assert (retry.failures, retry.attempt, retry.problem) == (5, 1, "read-only file system")
