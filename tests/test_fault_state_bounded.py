"""A chip's fault state stays bounded however many distinct codes its driver sends.

A driver (or a storm of events) may name any number of codes; once a code is
gone from the chip, and polls have begun since its events, nothing of it is
kept per code.
"""

from __future__ import annotations

import tracemalloc

from fault_policy_harness import Node

CODES = 20_000  # distinct codes, each raised and cleared by events
BOUND = 256 * 1024  # bytes the state may keep after them all (about 100 bytes per code when kept)


def test_codes_that_came_and_went_leave_nothing_behind() -> None:
    node = Node()
    node.polled(0)  # the chip is known, with nothing on it
    node.judge(0)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for code in range(0x10000000, 0x10000000 + CODES):
            node.raised(0, code)
            node.cleared(0, code)
            node.once(0, code + CODES)
            node.clock.advance(3600)  # the one-off's hold is over
            node.judge(0)
        node.polled(0)
        assert node.judge(0).healthy
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < BOUND, f"{after - before} bytes kept for {CODES} codes gone"


def test_a_current_code_keeps_what_judging_it_needs() -> None:
    node = Node()
    node.raised(0, 0x80E01801, severity=3)
    for code in range(0x10000000, 0x10000000 + 100):
        node.raised(0, code)
        node.cleared(0, code)
    assert not node.judge(0).healthy  # 80E01801 still current, its level still known
    node.cleared(0, 0x80E01801)
    assert node.judge(0).healthy
