"""Backoff: delays that double to a cap; with full jitter, each drawn below its ceiling, so that the nodes
of a DaemonSet do not retry the API server in lockstep after it comes back."""

from __future__ import annotations

import pytest

from ascend_plugin.kubeapi.errors import ApiError
from ascend_plugin.kubeapi.retry import KUBE_BACKOFF, Retrier
from ascend_plugin.resilience import PART_BACKOFF, Backoff

pytestmark = pytest.mark.anyio


def test_without_jitter_the_delay_is_the_ceiling() -> None:
    backoff = Backoff(0.5, 4.0)
    assert [backoff.after(attempt) for attempt in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.after(0) == 0.5


def test_full_jitter_draws_each_delay_between_zero_and_the_ceiling() -> None:
    draws = iter([0.0, 0.5, 0.999, 0.25])
    backoff = Backoff(0.5, 4.0, jitter=lambda: next(draws))
    assert [backoff.after(attempt) for attempt in (1, 2, 3, 9)] == [0.0, 0.5, 1.998, 1.0]
    assert [backoff.ceiling(attempt) for attempt in (1, 2, 3, 9)] == [0.5, 1.0, 2.0, 4.0]


def test_the_api_server_and_the_part_restarts_are_retried_with_jitter() -> None:
    """Every node retries these against one API server (or after one outage): they must spread."""
    assert KUBE_BACKOFF.jitter is not None
    assert PART_BACKOFF.jitter is not None
    spread = {KUBE_BACKOFF.after(4) for _ in range(50)}
    assert len(spread) > 1
    assert all(0.0 <= delay < KUBE_BACKOFF.ceiling(4) for delay in spread)


async def test_a_retrier_sleeps_the_jittered_delay() -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    retry = Retrier("node labels", Backoff(0.5, 15.0, jitter=lambda: 0.5), sleep)
    error = ApiError(503, "patch", "nodes", "n1", "the server is shutting down")
    for _ in range(3):
        await retry.failed(error)
    assert slept == [0.25, 0.5, 1.0]
