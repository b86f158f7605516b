"""ManuallySeparateNPU: a chip stays separated, across restarts, until an operator or its window lifts it."""

from __future__ import annotations

from fault_policy_harness import DAY, LINK_DOWN, Node, configured

from ascend_plugin.fault_policy.chip import RELEASES_KEPT
from ascend_plugin.fault_policy.escalations import AUTOFILL_CODE, ReleaseCause, UpgradeKind, UpgradeReason
from ascend_plugin.fault_policy.faults import FaultLevel

L = FaultLevel
RECURRING = 0x80E18005  # built in: 3 times a day -> ManuallySeparateNPU, no release window
FLAKY = 0xA0000001


def separated_node() -> Node:
    node = Node()
    for _ in range(3):
        node.raised(0, RECURRING)
        node.cleared(0, RECURRING)
    assert node.judge(0).manually_separated
    return node


def manual_reason(at: int, code: str = "80e18005") -> UpgradeReason:
    return UpgradeReason(code, L.ManuallySeparateNPU, UpgradeKind.FREQUENCY, at)


def test_an_operator_deleting_the_name_releases_the_chip() -> None:
    node = separated_node()
    node.policy.mark_written([0])
    node.policy.sync_manual_separation([0])
    assert node.judge(0).manually_separated
    node.policy.sync_manual_separation([])
    judged = node.judge(0)
    assert (judged.level, judged.healthy, judged.manually_separated) == (L.NormalNPU, True, False)
    [release] = node.policy.drain_releases()
    assert (release.phy_id, release.cause) == (0, ReleaseCause.OPERATOR)
    assert [reason.level for reason in release.reasons] == [L.ManuallySeparateNPU]
    assert node.policy.manually_separated() == ()


def test_releases_nobody_posts_are_kept_bounded_the_oldest_dropped() -> None:
    """With node events off nothing drains the releases: a chip keeps its latest RELEASES_KEPT only."""
    node = Node()
    for _ in range(RELEASES_KEPT + 4):
        node.policy.restore([0], {})  # a separation read back (autofilled), written, then released
        node.policy.mark_written([0])
        node.policy.sync_manual_separation([])
    releases = node.policy.drain_releases()
    assert len(releases) == RELEASES_KEPT
    assert all(release.cause is ReleaseCause.OPERATOR for release in releases)
    assert node.policy.drain_releases() == []


def test_a_chip_not_yet_written_out_is_not_released_by_its_absence() -> None:
    node = separated_node()
    node.policy.sync_manual_separation([])  # the ConfigMap does not name it yet: our write is pending
    assert node.judge(0).manually_separated
    node.policy.mark_written([0])
    node.policy.sync_manual_separation([])
    assert not node.judge(0).manually_separated


def test_a_release_lifts_only_manual_separations() -> None:
    node = Node(
        configured(customization={"FaultDuration": [_slow_rule()], "FaultFrequency": [_manual_rule()]})
    )
    node.raised(0, FLAKY)
    node.clock.advance(11)
    assert [reason.kind for reason in node.judge(0).reasons] == [UpgradeKind.DURATION, UpgradeKind.FREQUENCY]
    node.policy.mark_written([0])
    node.policy.sync_manual_separation([])
    assert [(r.kind, r.level) for r in node.judge(0).reasons] == [(UpgradeKind.DURATION, L.SeparateNPU)]


def test_names_the_plugin_never_separated_are_left_for_the_next_write() -> None:
    node = Node()
    node.policy.sync_manual_separation([3])
    assert node.policy.manually_separated() == ()
    assert not node.judge(3).manually_separated


def test_a_separation_read_back_at_start_keeps_the_chip_unhealthy() -> None:
    node = Node()
    node.policy.restore([0], {0: [manual_reason(1_000)]})
    judged = node.judge(0)
    assert (judged.level, judged.healthy) == (L.ManuallySeparateNPU, False)
    assert judged.reasons == (manual_reason(1_000),)
    node.policy.sync_manual_separation([])  # it is in the ConfigMap already: its absence releases it
    assert not node.judge(0).manually_separated


def test_a_listed_chip_without_a_reason_gets_an_autofilled_one_released_after_the_longest_window() -> None:
    node = Node()
    node.policy.restore([2], {})
    start = node.clock.ms
    judged = node.judge(2)
    assert judged.reasons == (
        UpgradeReason(AUTOFILL_CODE, L.ManuallySeparateNPU, UpgradeKind.AUTOFILL, start),
    )
    assert (judged.level, judged.chip.codes) == (L.ManuallySeparateNPU, ())  # the autofill names no code
    assert node.policy.wake_at() == start + 172_800_000  # the built-in 81078603 ReleaseTimeWindow
    assert node.at(2 * DAY - 1, phy=2).manually_separated
    assert not node.at(1, phy=2).manually_separated
    [release] = node.policy.drain_releases()
    assert release.cause is ReleaseCause.AUTOFILL_WINDOW


def test_an_autofilled_separation_without_any_release_window_stays() -> None:
    node = Node(configured(customization={"FaultFrequency": [_manual_rule()]}))
    node.policy.restore([2], {})
    assert node.at(100 * DAY, phy=2).manually_separated


def test_manual_reasons_of_a_chip_the_key_no_longer_names_are_dropped_at_start() -> None:
    node = Node()
    duration = UpgradeReason("81078603", L.PreSeparateNPU, UpgradeKind.DURATION, 5_000)
    node.policy.restore([], {1: [manual_reason(1_000), duration]})
    judged = node.judge(1)
    assert not judged.manually_separated
    assert judged.reasons == (duration,)
    [release] = node.policy.drain_releases()
    assert release.cause is ReleaseCause.OPERATOR


def test_restored_escalations_whose_rule_is_gone_are_dropped_but_manual_ones_stay() -> None:
    node = Node(configured(customization={}))  # no rules at all
    gone = UpgradeReason("81078603", L.PreSeparateNPU, UpgradeKind.DURATION, 5_000)
    node.policy.restore([0], {0: [manual_reason(1_000), gone]})
    assert node.judge(0).reasons == (manual_reason(1_000),)
    assert [release.cause for release in node.policy.drain_releases()] == [ReleaseCause.CONFIGURATION]


def test_a_restored_escalation_counts_its_release_window_from_the_start() -> None:
    node = Node()
    network = UpgradeReason("81078603", L.ManuallySeparateNPU, UpgradeKind.FREQUENCY, 1_000)
    node.policy.restore([0], {0: [network]})
    assert node.at(2 * DAY).network_level is L.ManuallySeparateNPU
    assert node.at(0.001).network_level is L.NormalNPU
    assert node.policy.manually_separated() == ()


def test_a_restored_escalation_waits_while_the_chip_shows_the_code_again() -> None:
    node = Node()
    network = UpgradeReason("81078603", L.ManuallySeparateNPU, UpgradeKind.FREQUENCY, 1_000)
    node.policy.restore([0], {0: [network]})
    node.polled(0, LINK_DOWN)  # the first poll after the start still lists it
    assert node.at(3 * DAY).network_level is L.ManuallySeparateNPU
    node.polled(0)
    node.clock.advance(60)  # FaultDuration: its recovery, 60 s after the clear, starts the window
    assert node.at(2 * DAY).network_level is L.ManuallySeparateNPU
    assert node.at(0.001).network_level is L.NormalNPU


def test_a_restored_duration_escalation_recovers_once_clear_for_its_recover_timeout() -> None:
    node = Node()
    node.policy.restore([], {0: [UpgradeReason("81078603", L.PreSeparateNPU, UpgradeKind.DURATION, 1_000)]})
    assert node.judge(0).network_level is L.PreSeparateNPU
    assert node.at(60.001).network_level is L.NormalNPU


def test_a_reload_updates_levels_drops_removed_rules_and_keeps_manual_separations() -> None:
    flaky = {
        "EventId": ["A0000001"],
        "TimeWindow": 600,
        "Times": 1,
        "FaultHandling": "SeparateNPU",
        "ReleaseTimeWindow": 600,
    }
    node = Node(configured(customization={"FaultFrequency": [flaky, _manual_rule(["80E18005"])]}))
    node.raised(0, FLAKY)
    node.raised(0, RECURRING)
    assert [(r.fault_code, r.level) for r in node.judge(0).reasons] == [
        ("80e18005", L.ManuallySeparateNPU),
        ("a0000001", L.SeparateNPU),
    ]
    node.policy.drain_releases()
    node.policy.reconfigure(
        configured(customization={"FaultFrequency": [{**flaky, "FaultHandling": "PreSeparateNPU"}]})
    )
    assert [(r.fault_code, r.level) for r in node.judge(0).reasons] == [
        ("80e18005", L.ManuallySeparateNPU),  # its rule is gone, the separation stays for an operator
        ("a0000001", L.PreSeparateNPU),
    ]
    node.policy.reconfigure(configured(customization={}))
    assert [(r.fault_code, r.level) for r in node.judge(0).reasons] == [("80e18005", L.ManuallySeparateNPU)]
    assert [release.cause for release in node.policy.drain_releases()] == [ReleaseCause.CONFIGURATION] * 2


def _manual_rule(codes: list[str] | None = None) -> dict[str, object]:
    return {
        "EventId": codes or ["A0000001"],
        "TimeWindow": 600,
        "Times": 1,
        "FaultHandling": "ManuallySeparateNPU",
    }


def _slow_rule() -> dict[str, object]:
    return {"EventId": ["A0000001"], "FaultTimeout": 10, "RecoverTimeout": 10, "FaultHandling": "SeparateNPU"}
