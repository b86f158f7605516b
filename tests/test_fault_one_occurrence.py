"""One fault seen twice, by the poll that found it and by its event, is one occurrence for FaultFrequency.

The driver's fault event and the health poll race: under load the poll may
list a code before its event arrives. Counting both would make a single HBM
error (built-in FaultFrequency: 2 a day escalate to ManuallySeparateNPU) keep
its chip out until an operator releases it.
"""

from __future__ import annotations

from fault_policy_harness import Node

from ascend_plugin.fault_policy.faults import FaultLevel

HBM_MULTI_BIT = 0x80E01801


def test_a_fault_polled_then_raised_by_its_event_counts_once() -> None:
    node = Node()
    node.polled(0, HBM_MULTI_BIT)
    node.raised(0, HBM_MULTI_BIT)
    node.cleared(0, HBM_MULTI_BIT)
    node.polled(0)
    judged = node.at(1.0)
    assert judged.level is not FaultLevel.ManuallySeparateNPU
    assert judged.healthy


def test_two_separate_faults_within_the_window_still_escalate() -> None:
    node = Node()
    for _ in range(2):
        node.raised(0, HBM_MULTI_BIT)
        node.cleared(0, HBM_MULTI_BIT)
        node.polled(0)
        node.at(60.0)
    judged = node.at(1.0)
    assert judged.level is FaultLevel.ManuallySeparateNPU
    assert judged.manually_separated
