"""The supervisor's record of each part: running or waiting to restart, failing since when, the last error;
a part supervised inside another is recorded in the same place."""

from __future__ import annotations

import anyio
import pytest
from waiting import until

from ascend_plugin.path_facts import PathUnusable
from ascend_plugin.resilience import (
    Backoff,
    PartStatus,
    RootTask,
    Supervision,
    describe,
    run_root_tasks,
    supervise,
)

pytestmark = pytest.mark.anyio

QUICK = Backoff(0.001, 0.001)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def status(supervision: Supervision, name: str) -> PartStatus:
    (found,) = [part for part in supervision.parts() if part.name == name]
    return found


async def test_a_part_that_fails_at_every_start_keeps_failing_since_its_first_failure() -> None:
    clock = Clock()
    supervision = Supervision(clock=clock, recovered_after=10.0)
    seen: list[PartStatus] = []

    async def part() -> None:
        seen.append(status(supervision, "sockets"))
        clock.now += 1.0  # each run lasts a second, then fails
        raise PathUnusable(f"cannot create x.sock (run {len(seen)})")

    async with anyio.create_task_group() as group:
        group.start_soon(run_root_tasks, [RootTask("sockets", part, backoff=QUICK)], supervision)
        await until(lambda: len(seen) >= 4, "four runs")
        group.cancel_scope.cancel()
    first, *restarts = seen
    assert (first.running, first.failing_since, first.last_error) == (True, None, "")
    for number, restart in enumerate(restarts, start=1):
        assert restart.running
        assert restart.failing_since == 101.0, "the first failure, however often restarted since"
        assert restart.last_error == f"cannot create x.sock (run {number})"
    assert supervision.parts() == [], "a part that ended leaves the record"


async def test_a_run_that_lasts_ends_the_streak_and_a_later_failure_starts_a_new_one() -> None:
    clock = Clock()
    supervision = Supervision(clock=clock, recovered_after=10.0)
    runs = 0
    release = anyio.Event()

    async def part() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise PathUnusable("cannot create x.sock")
        await release.wait()
        raise RuntimeError("lost it")

    async with anyio.create_task_group() as group:
        group.start_soon(run_root_tasks, [RootTask("sockets", part, backoff=QUICK)], supervision)
        await until(lambda: runs == 2, "restarted after the first failure")
        assert status(supervision, "sockets").failing_since == 100.0
        assert status(supervision, "sockets").failing_for(clock.now + 9.0) == 9.0
        clock.now += 10.0
        serving = status(supervision, "sockets")
        assert (serving.running, serving.failing_since) == (True, None)
        assert serving.failing_for(clock.now) == 0.0
        assert serving.last_error == "cannot create x.sock", "the last error is kept for the record"
        release.set()
        await until(lambda: not status(supervision, "sockets").running, "failed again")
        failed = status(supervision, "sockets")
        assert failed.failing_since == 110.0, "a new streak"
        assert failed.last_error == "RuntimeError: lost it"
        assert failed.restart_at == 110.0 + 0.001
        group.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("run_lasts", "delays", "serving_again"),
    [
        (30.0, [0.001, 0.001, 0.001], True),  # crashing every 30 s: serving between, no growing backoff
        (9.0, [0.001, 0.002, 0.004], False),  # shorter than recovered_after: one streak, backoff doubles
    ],
)
async def test_the_backoff_restarts_from_the_shortest_delay_exactly_when_the_streak_ends(
    run_lasts: float, delays: list[float], serving_again: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """One threshold for both: a part the probes count as serving again is not in a crash loop."""
    clock = Clock()
    supervision = Supervision(clock=clock, recovered_after=10.0)
    seen: list[PartStatus] = []

    async def part() -> None:
        clock.now += run_lasts
        seen.append(status(supervision, "publisher"))
        raise RuntimeError("lost it")

    async with anyio.create_task_group() as group:
        group.start_soon(
            run_root_tasks, [RootTask("publisher", part, backoff=Backoff(0.001, 1.0))], supervision
        )
        await until(lambda: len(seen) >= 4, "four runs")
        group.cancel_scope.cancel()
    restarts = [
        record.args for record in caplog.records if record.getMessage().startswith("publisher failed")
    ]
    assert [args[1] for args in restarts[:3] if isinstance(args, tuple)] == delays
    assert all((later.failing_since is None) is serving_again for later in seen[1:4])


async def test_parts_supervised_inside_a_root_task_are_recorded_with_it() -> None:
    supervision = Supervision()
    inner_started = anyio.Event()

    async def inner() -> None:
        inner_started.set()
        await anyio.sleep_forever()

    async def outer() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(supervise, "ResourceSlices", inner)
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        group.start_soon(
            run_root_tasks, [RootTask("DRA driver", outer, lambda: ["not registered"])], supervision
        )
        await inner_started.wait()
        parts = supervision.parts()
        assert [part.name for part in parts] == ["DRA driver", "ResourceSlices"]
        assert parts[0].problems is not None
        assert list(parts[0].problems()) == ["not registered"]
        assert parts[1].problems is None
        group.cancel_scope.cancel()
    assert supervision.parts() == []


def test_errors_read_as_their_own_words_or_with_their_type() -> None:
    assert describe(PathUnusable("cannot create /x.sock: a regular file is in its place")) == (
        "cannot create /x.sock: a regular file is in its place"
    )
    assert describe(KeyError("phy_id")) == "KeyError: 'phy_id'"
    assert describe(OSError(30, "Read-only file system")) == "OSError: [Errno 30] Read-only file system"
    assert describe(RuntimeError()) == "RuntimeError"
