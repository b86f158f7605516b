"""FaultDuration: a code present past its timeout escalates, until it has stayed clear past its recovery."""

from __future__ import annotations

from fault_policy_harness import DAY, LINK_DOWN, Node, configured
from hypothesis import given, settings
from hypothesis import strategies as st

from ascend_plugin.fault_policy.customization import DurationRule
from ascend_plugin.fault_policy.escalations import DurationClock, DurationEdge, ReleaseCause, UpgradeKind
from ascend_plugin.fault_policy.faults import FaultLevel

L = FaultLevel
# Wall-clock deadlines would fail under CPU pressure; the examples are cheap.
PROPERTIES = settings(max_examples=200, deadline=None)
SLOW = 0xA0000002


def slow_node(timeout: int = 30, recover: int = 10) -> Node:
    rule = {
        "EventId": ["A0000002"],
        "FaultTimeout": timeout,
        "RecoverTimeout": recover,
        "FaultHandling": "SeparateNPU",
    }
    return Node(configured({"SubHealthFaultCodes": ["A0000002"]}, {"FaultDuration": [rule]}))


def test_a_code_present_longer_than_its_timeout_escalates() -> None:
    node = slow_node(timeout=30)
    node.raised(0, SLOW)
    raised_at = node.clock.ms
    assert node.judge(0).level is L.SubHealthFault
    assert node.policy.wake_at() == raised_at + 30_001
    assert node.at(30).level is L.SubHealthFault  # present for exactly the timeout: not longer
    judged = node.at(0.001)
    assert judged.level is L.SeparateNPU
    assert [(r.kind, r.level, r.upgrade_time) for r in judged.reasons] == [
        (UpgradeKind.DURATION, L.SeparateNPU, raised_at + 30_000)
    ]


def test_it_recovers_only_after_staying_clear_longer_than_the_recover_timeout() -> None:
    node = slow_node(timeout=30, recover=10)
    node.raised(0, SLOW)
    node.at(31)
    node.cleared(0, SLOW)
    assert node.at(10).level is L.SeparateNPU
    node.raised(0, SLOW)  # back within RecoverTimeout: still timed out
    assert node.at(100).level is L.SeparateNPU
    node.cleared(0, SLOW)
    assert node.at(10.001).level is L.NormalNPU
    [release] = node.policy.drain_releases()
    assert release.cause is ReleaseCause.RECOVERED


def test_flapping_shorter_than_the_timeout_never_escalates() -> None:
    node = slow_node(timeout=30)
    for _ in range(100):
        node.raised(0, SLOW)
        node.clock.advance(29)
        node.cleared(0, SLOW)
        node.clock.advance(1)
    assert node.judge(0).reasons == ()


def test_a_presence_that_ended_is_judged_by_how_long_it_lasted() -> None:
    # Nobody judged while it was present: its clear still tells it lasted past the timeout.
    node = slow_node(timeout=30, recover=10)
    node.raised(0, SLOW)
    node.clock.advance(40)
    node.cleared(0, SLOW)
    assert node.judge(0).level is L.SeparateNPU
    assert node.at(10.001).level is L.NormalNPU


def test_the_link_down_default_pre_separates_the_network_after_20_s_and_recovers_after_60_s() -> None:
    node = Node()
    node.raised(0, LINK_DOWN)
    judged = node.at(20)
    assert (judged.network_level, judged.network_healthy) == (L.NotHandleFault, True)
    judged = node.at(0.001)
    assert (judged.network_level, judged.network_healthy) == (L.PreSeparateNPU, False)
    assert (judged.level, judged.healthy) == (L.NormalNPU, True)  # the chip itself stays healthy
    node.cleared(0, LINK_DOWN)
    assert node.at(60).network_level is L.PreSeparateNPU
    assert node.at(0.001).network_level is L.NormalNPU


def test_five_link_downs_past_their_timeout_in_a_day_separate_the_chip_until_released() -> None:
    node = Node()
    for _ in range(4):
        node.raised(0, LINK_DOWN)
        node.clock.advance(21)
        node.cleared(0, LINK_DOWN)
        node.clock.advance(61)
    # Short ones do not count: only each timeout is an occurrence.
    for _ in range(10):
        node.raised(0, LINK_DOWN)
        node.clock.advance(5)
        node.cleared(0, LINK_DOWN)
        node.clock.advance(61)
    assert node.judge(0).network_level is L.NormalNPU
    node.raised(0, LINK_DOWN)
    judged = node.at(21)
    assert judged.network_level is L.ManuallySeparateNPU
    assert judged.manually_separated
    assert judged.level is L.NormalNPU
    assert judged.healthy
    node.cleared(0, LINK_DOWN)
    assert node.at(61).network_level is L.ManuallySeparateNPU
    # ReleaseTimeWindow 172800 s counts from the recovery (60 s after the link came back).
    assert node.at(2 * DAY - 1).network_level is L.ManuallySeparateNPU
    judged = node.at(1.001)
    assert judged.network_level is L.NormalNPU
    assert not judged.manually_separated


# -- the clock on its own, over any sequence of raises and clears ---------------------------

RULE = DurationRule(fault_timeout=20, recover_timeout=60, handling=L.PreSeparateNPU)
steps = st.lists(st.tuples(st.booleans(), st.integers(1, 200_000)), max_size=40)


def run(sequence: list[tuple[bool, int]]) -> tuple[list[tuple[DurationEdge, int]], list[tuple[int, int]]]:
    """Feed raise (True) / clear (False) after each gap (ms); the edges, and the presences (start, end)."""
    clock, now, edges, presences, start = DurationClock(), 0, [], [], None
    for raise_it, gap in sequence:
        now += gap
        changes = clock.raised(now, RULE) if raise_it else clock.cleared(now, RULE)
        edges += [(change.edge, change.at) for change in changes]
        if raise_it and start is None:
            start = now
        elif not raise_it and start is not None:
            presences.append((start, now))
            start = None
    now += 10**9
    edges += [(change.edge, change.at) for change in clock.advance(now, RULE)]
    if start is not None:
        presences.append((start, now))
    return edges, presences


@PROPERTIES
@given(steps)
def test_it_times_out_at_the_first_presence_longer_than_the_timeout_and_no_sooner(
    sequence: list[tuple[bool, int]],
) -> None:
    edges, presences = run(sequence)
    long_ones = [start for start, end in presences if end - start > 20_000]
    if not long_ones:
        assert edges == []
    else:
        assert edges[0] == (DurationEdge.TIMED_OUT, long_ones[0] + 20_000)


@PROPERTIES
@given(steps)
def test_edges_alternate_and_a_recovery_follows_a_clear_longer_than_the_recover_timeout(
    sequence: list[tuple[bool, int]],
) -> None:
    edges, presences = run(sequence)
    assert [edge for edge, _ in edges] == [
        DurationEdge.TIMED_OUT if index % 2 == 0 else DurationEdge.RECOVERED for index in range(len(edges))
    ]
    ends = [end for _, end in presences]
    for edge, at in edges:
        if edge is DurationEdge.RECOVERED:
            cleared = at - 60_000
            assert cleared in ends  # 60 s after a clear ...
            assert not any(
                start <= at and start > cleared for start, _ in presences
            )  # ... with no raise between
