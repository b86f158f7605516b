"""FaultFrequency: a code that recurs within its window escalates; clear long enough, it is released."""

from __future__ import annotations

from fault_policy_harness import DAY, Node, configured

from ascend_plugin.fault_policy.escalations import ReleaseCause, UpgradeKind, UpgradeReason
from ascend_plugin.fault_policy.faults import FaultLevel

L = FaultLevel
RECURRING = 0x80E18005  # built in: RestartNPU, 3 times a day -> ManuallySeparateNPU
FLAKY = 0xA0000001


def flaky_node(times: int = 2, window: int = 600, release: int = 120, handling: str = "SeparateNPU") -> Node:
    rule = {"EventId": ["A0000001"], "TimeWindow": window, "Times": times, "FaultHandling": handling}
    if release:
        rule["ReleaseTimeWindow"] = release
    return Node(configured({"RestartBusinessCodes": ["A0000001"]}, {"FaultFrequency": [rule]}))


def occur(node: Node, code: int, times: int, gap: float = 10.0) -> None:
    for _ in range(times):
        node.raised(0, code)
        node.clock.advance(1)
        node.cleared(0, code)
        node.clock.advance(gap)


def test_the_third_occurrence_in_a_day_separates_the_chip_for_good() -> None:
    node = Node()
    occur(node, RECURRING, 2)
    assert node.judge(0).level is L.NormalNPU
    node.raised(0, RECURRING)
    third = node.clock.ms
    judged = node.judge(0)
    assert judged.level is L.ManuallySeparateNPU
    assert judged.manually_separated
    assert not judged.healthy
    assert judged.reasons == (UpgradeReason("80e18005", L.ManuallySeparateNPU, UpgradeKind.FREQUENCY, third),)
    node.cleared(0, RECURRING)
    assert node.at(30 * DAY).level is L.ManuallySeparateNPU  # no ReleaseTimeWindow: only an operator lifts it
    assert node.policy.manually_separated() == (0,)
    assert node.policy.wake_at() is None


def test_occurrences_older_than_the_window_are_forgotten() -> None:
    node = Node()
    occur(node, RECURRING, 2)
    node.clock.advance(DAY - 20)  # the first occurrence is now just outside the day
    node.raised(0, RECURRING)
    assert node.judge(0).level is L.RestartNPU  # its own level: two in the window, not three
    node.cleared(0, RECURRING)
    node.raised(0, RECURRING)
    assert node.judge(0).level is L.ManuallySeparateNPU


def test_an_occurrence_exactly_at_the_window_start_still_counts() -> None:
    node = flaky_node(times=2, window=600)
    node.raised(0, FLAKY)
    node.cleared(0, FLAKY)
    node.clock.advance(600)
    node.raised(0, FLAKY)
    assert node.judge(0).level is L.SeparateNPU


def test_an_escalation_with_a_release_window_lifts_once_clear_for_longer_than_it() -> None:
    node = flaky_node(times=2, release=120)
    occur(node, FLAKY, 2)
    assert node.judge(0).level is L.SeparateNPU
    cleared_at = node.clock.ms - 10_000  # the second occurrence cleared 10 s ago
    assert node.policy.wake_at() == cleared_at + 120_000 + 1
    node.clock.now = cleared_at / 1000 + 120
    assert node.judge(0).level is L.SeparateNPU  # clear for exactly the window: not more
    node.clock.advance(0.001)
    judged = node.judge(0)
    assert judged.level is L.NormalNPU
    assert judged.reasons == ()
    [release] = node.policy.drain_releases()
    assert release.cause is ReleaseCause.RELEASE_WINDOW
    assert [reason.level for reason in release.reasons] == [L.SeparateNPU]


def test_recurring_while_escalated_moves_the_escalation_and_is_not_counted_again() -> None:
    node = flaky_node(times=2, release=120)
    occur(node, FLAKY, 2)
    node.clock.advance(100)
    node.raised(0, FLAKY)  # within the release window: it has not stayed clear
    again = node.clock.ms
    judged = node.judge(0)
    assert judged.level is L.SeparateNPU
    assert [reason.upgrade_time for reason in judged.reasons] == [again]
    assert node.policy.wake_at() is None  # not recovered since it last occurred
    node.clock.advance(5)
    node.cleared(0, FLAKY)
    node.clock.advance(121)
    assert node.judge(0).level is L.NormalNPU
    # The count started afresh at the escalation: one occurrence now is just one.
    node.raised(0, FLAKY)
    assert node.judge(0).level is L.RestartBusiness


def test_one_off_events_count_as_occurrences() -> None:
    node = flaky_node(times=2)
    node.once(0, FLAKY)
    node.clock.advance(1)
    node.once(0, FLAKY)
    assert node.judge(0).level is L.SeparateNPU


def test_a_code_without_a_rule_never_escalates() -> None:
    node = Node()
    occur(node, 0x80E18402, 50, gap=1)  # SeparateNPU by its list, no FaultFrequency entry
    assert node.judge(0).level is L.NormalNPU
    assert node.judge(0).reasons == ()


def test_each_chip_counts_its_own_occurrences() -> None:
    node = Node()
    for phy in (0, 1, 2):
        node.raised(phy, RECURRING)
        node.cleared(phy, RECURRING)
    assert [node.judge(phy).level for phy in (0, 1, 2)] == [L.NormalNPU] * 3
