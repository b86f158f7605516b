"""FaultFrequency with several codes on one chip: the most severe escalation wins, whatever the order.

Huawei's plugin assigned each code's result in turn while walking a Go map, so
the level depended on the map's order and a later code below its threshold
could wipe out an earlier escalation (fixed in August 2026: the results are
gathered and the most severe taken). Here every order of the rules and of the
occurrences must give the same, most severe, level.
"""

from __future__ import annotations

import itertools

import pytest
from fault_policy_harness import Node, configured

from ascend_plugin.fault_policy.faults import FaultLevel

L = FaultLevel
SEPARATING = 0xA0000001  # once -> ManuallySeparateNPU
RESTARTING = 0xA0000002  # once -> RestartBusiness
BELOW = 0xA0000003  # three times -> SeparateNPU; occurs once here, so it escalates nothing
RULES = {
    SEPARATING: {
        "EventId": ["A0000001"],
        "TimeWindow": 600,
        "Times": 1,
        "FaultHandling": "ManuallySeparateNPU",
    },
    RESTARTING: {
        "EventId": ["A0000002"],
        "TimeWindow": 600,
        "Times": 1,
        "FaultHandling": "RestartBusiness",
        "ReleaseTimeWindow": 600,
    },
    BELOW: {
        "EventId": ["A0000003"],
        "TimeWindow": 600,
        "Times": 3,
        "FaultHandling": "SeparateNPU",
        "ReleaseTimeWindow": 600,
    },
}


def node_with(rule_order: tuple[int, ...]) -> Node:
    """Codes that are NotHandle by themselves: only their FaultFrequency rules can escalate them."""
    codes = {"NotHandleFaultCodes": ["A0000001", "A0000002", "A0000003"]}
    return Node(configured(codes, {"FaultFrequency": [RULES[code] for code in rule_order]}))


ORDERS = list(itertools.permutations(RULES))


def _named(order: tuple[int, ...]) -> str:
    return "-".join(f"{code:X}" for code in order)


@pytest.mark.parametrize("rule_order", ORDERS, ids=_named)
@pytest.mark.parametrize("raise_order", ORDERS, ids=_named)
def test_the_most_severe_escalation_wins_whatever_the_order(
    rule_order: tuple[int, ...], raise_order: tuple[int, ...]
) -> None:
    node = node_with(rule_order)
    for code in raise_order:
        node.raised(0, code)
        node.clock.advance(1)
    judged = node.judge(0)
    assert judged.level is L.ManuallySeparateNPU
    assert {reason.level for reason in judged.reasons} == {L.ManuallySeparateNPU, L.RestartBusiness}
    assert not judged.healthy


def test_two_codes_of_different_handling_keep_the_worse_one_once_the_milder_recurs() -> None:
    node = node_with((RESTARTING, SEPARATING, BELOW))
    node.raised(0, SEPARATING)
    node.clock.advance(1)
    node.cleared(0, SEPARATING)
    for _ in range(2):  # the milder code recurs after the worse one: it must not take its place
        node.raised(0, RESTARTING)
        node.clock.advance(1)
        node.cleared(0, RESTARTING)
        node.raised(0, BELOW)
        node.clock.advance(1)
        node.cleared(0, BELOW)
    assert node.judge(0).level is L.ManuallySeparateNPU
