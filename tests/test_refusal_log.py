"""RefusalLog: at most one line per peer per 10 s, and the count of what it did not log."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from log_records import fields, records

from ascend_plugin.grpc_guard.refusal_log import RefusalLog
from ascend_plugin.grpc_guard.refusals import BadRequest, TooLarge

LOGGER = "ascend_plugin.grpc_guard.refusal_log"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """Each line's fields: a refusal has all four, a pruned peer's count has no status or reason."""
    return [fields(record, "peer", "status", "reason", "suppressed") for record in records(caplog, LOGGER)]


def test_one_line_per_peer_per_interval_then_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = RefusalLog(clock=clock)
    caplog.set_level(logging.WARNING, LOGGER)
    for _ in range(500):
        refusals.refused("pid 7 (uid 0)", BadRequest("shape", "Empty is malformed"))
        clock.now += 0.01  # 500 calls in 5 s
    first = {"peer": "pid 7 (uid 0)", "status": "INVALID_ARGUMENT", "reason": "shape"}
    assert lines(caplog) == [first | {"suppressed": 0}]
    clock.now = 110.0  # exactly 10 s after the first line
    refusals.refused("pid 7 (uid 0)", TooLarge("size", "too big"))
    second = {"peer": "pid 7 (uid 0)", "status": "RESOURCE_EXHAUSTED", "reason": "size", "suppressed": 499}
    assert lines(caplog)[1:] == [second]


def test_peers_are_limited_separately(caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(clock=Clock())
    caplog.set_level(logging.WARNING, LOGGER)
    for peer in ("pid 7 (uid 0)", "pid 8 (uid 0)", "pid 7 (uid 0)", "pid 8 (uid 1000)"):
        refusals.refused(peer, BadRequest("shape", "bad"))
    assert [line["peer"] for line in lines(caplog)] == ["pid 7 (uid 0)", "pid 8 (uid 0)", "pid 8 (uid 1000)"]


def test_a_quiet_peer_s_count_is_logged_when_the_table_is_pruned(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = RefusalLog(clock=clock)
    caplog.set_level(logging.WARNING, LOGGER)
    refusals.refused("pid 1 (uid 0)", BadRequest("shape", "bad"))
    refusals.refused("pid 1 (uid 0)", BadRequest("shape", "bad"))  # suppressed
    clock.now += 11
    for pid in range(2, 66):  # enough other peers to prune the table
        refusals.refused(f"pid {pid} (uid 0)", BadRequest("shape", "bad"))
    assert {"peer": "pid 1 (uid 0)", "suppressed": 1} in lines(caplog)
