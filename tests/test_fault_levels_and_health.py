"""A chip's level from its codes and escalations, and the kubelet and network health Huawei maps it to."""

from __future__ import annotations

import pytest
from fault_policy_harness import LINK_DOWN, Node, configured

from ascend_plugin.fault_policy.chip import CodeTime
from ascend_plugin.fault_policy.faults import (
    CARD_DROP,
    RESET_FINISHED,
    Assertion,
    FaultLevel,
    Observation,
    kubelet_healthy,
    network_healthy,
)
from backends.library import FaultEvent

L = FaultLevel
SEPARATE = 0x80E18402
NOT_HANDLE = 0x80E21007
UNKNOWN = 0x12345678


@pytest.mark.parametrize(
    ("level", "free", "held"),
    [
        (L.NormalNPU, True, True),
        (L.NotHandleFault, True, True),
        (L.SubHealthFault, True, True),
        (L.RestartRequest, False, False),
        (L.RestartBusiness, False, False),
        (L.FreeRestartNPU, False, False),
        (L.RestartNPU, False, False),
        (L.PreSeparateNPU, False, True),
        (L.SeparateNPU, False, False),
        (L.ManuallySeparateNPU, False, False),
    ],
)
def test_kubelet_health_by_level(level: FaultLevel, free: bool, held: bool) -> None:
    assert kubelet_healthy(level, held=False) is free
    assert kubelet_healthy(level, held=True) is held


def test_network_health_is_healthy_only_at_normal_or_not_handle() -> None:
    assert [level for level in L if network_healthy(level)] == [L.NormalNPU, L.NotHandleFault]


def test_a_pre_separated_chip_stays_healthy_while_a_pod_holds_it() -> None:
    node = Node(configured({"PreSeparateNPUCodes": ["A0000007"]}))
    node.raised(0, 0xA0000007)
    assert node.judge(0, held=True).healthy
    assert not node.judge(0, held=False).healthy


def test_unknown_codes_polled_do_not_count_but_from_a_severe_event_separate() -> None:
    node = Node()
    node.polled(0, UNKNOWN)
    assert node.judge(0).level is L.NotHandleFault
    node.raised(1, UNKNOWN, severity=2)
    assert node.judge(1).level is L.SeparateNPU
    node.raised(2, UNKNOWN, severity=1)
    assert node.judge(2).level is L.NotHandleFault
    node.raised(3, UNKNOWN, severity=None)  # the event did not say
    assert node.judge(3).level is L.SeparateNPU


def test_a_network_code_is_judged_for_the_network_only() -> None:
    node = Node(configured({"SeparateNPUCodes": ["81078603"]}))
    node.raised(0, LINK_DOWN)
    judged = node.judge(0)
    assert (judged.level, judged.healthy) == (L.NormalNPU, True)
    assert (judged.network_level, judged.network_healthy) == (L.SeparateNPU, False)
    assert judged.network.codes == ("81078603",)
    assert judged.chip.codes == ()


def test_an_unknown_network_code_pre_separates_the_network() -> None:
    node = Node(configured({}))
    node.raised(0, 0x81078607)
    assert node.judge(0).network_level is L.PreSeparateNPU


def test_the_fault_list_names_codes_in_arrival_order_with_first_times_and_escalated_levels() -> None:
    node = Node()
    node.raised(0, NOT_HANDLE)
    first = node.clock.ms
    node.clock.advance(5)
    node.raised(0, SEPARATE)
    second = node.clock.ms
    node.clock.advance(5)
    node.raised(0, NOT_HANDLE)  # again: its first time stays
    judged = node.judge(0)
    assert judged.chip.codes == ("80E21007", "80E18402")
    assert judged.chip.times == {
        "80E21007": CodeTime(first, L.NotHandleFault),
        "80E18402": CodeTime(second, L.SeparateNPU),
    }
    assert judged.level is L.SeparateNPU


def test_each_code_in_the_fault_list_carries_the_chips_escalations() -> None:
    # Huawei's per-code level is the level of the chip with that code alone, escalations included.
    node = Node()
    for _ in range(3):
        node.raised(0, 0x80E18005)  # 3 a day -> ManuallySeparateNPU
        node.cleared(0, 0x80E18005)
    node.raised(0, NOT_HANDLE)
    judged = node.judge(0)
    assert judged.chip.codes == ("80E21007", "80E18005")  # the escalated code is named after the current ones
    assert judged.chip.times["80E21007"].level is L.ManuallySeparateNPU
    assert judged.chip.times["80E18005"].level is L.ManuallySeparateNPU


def test_a_poll_clears_what_polls_found_but_not_what_only_events_reported() -> None:
    node = Node()
    node.raised(0, SEPARATE)  # an event alone
    node.polled(0, NOT_HANDLE)
    node.polled(0)
    assert node.judge(0).chip.codes == ("80E18402",)
    node.polled(0, SEPARATE)  # now a poll has listed it too ...
    node.polled(0)  # ... so a poll that no longer does clears it
    assert node.judge(0).chip.codes == ()


def test_a_one_off_event_holds_its_code_for_its_levels_hold() -> None:
    node = Node()
    node.once(0, SEPARATE)
    assert node.judge(0).level is L.SeparateNPU
    assert node.policy.wake_at() == node.clock.ms + 300_000
    assert node.at(299.999).level is L.SeparateNPU
    assert node.at(0.001).level is L.NormalNPU
    node.once(0, NOT_HANDLE)  # levels that stay healthy are not held at all
    assert node.judge(0).chip.codes == ()


def test_reset_finished_is_not_a_fault_but_asks_for_a_fresh_read() -> None:
    node = Node()
    assert node.raised(0, RESET_FINISHED) is True
    assert node.raised(0, SEPARATE) is False
    node.polled(0, RESET_FINISHED)
    assert node.judge(0).chip.codes == ("80E18402",)


def test_the_card_drop_code_is_restart_npu_by_default() -> None:
    node = Node()
    node.polled(0, CARD_DROP)
    assert (node.judge(0).level, node.judge(0).chip.codes) == (L.RestartNPU, ("40F84E00",))


def test_a_driver_event_becomes_an_observation() -> None:
    event = FaultEvent(logic_id=0, code=SEPARATE, severity=3, assertion=2)
    assert Observation.of_event(event, 5) == Observation(SEPARATE, Assertion.ONE_OFF, 5, 3)
    odd = FaultEvent(logic_id=0, code=SEPARATE, severity=3, assertion=7)
    assert Observation.of_event(odd, 5).assertion is Assertion.RAISED


def test_a_poll_begun_before_an_event_does_not_undo_it() -> None:
    node = Node()
    began = node.clock.ms
    node.polled(0, SEPARATE)  # the driver lists the code ...
    node.clock.advance(0.5)
    node.cleared(0, SEPARATE)  # ... its recovery event arrives while the next poll is on its way ...
    node.policy.reconcile(0, [SEPARATE], began)  # ... and that poll read the code before it cleared
    assert node.judge(0).chip.codes == ()
    node.raised(0, NOT_HANDLE)
    node.policy.reconcile(0, [], began)  # nor does it clear a code an event raised after it began
    assert node.judge(0).chip.codes == ("80E21007",)
    node.polled(0)  # a poll begun after both decides again (the raised code was never polled: it stays)
    assert node.judge(0).chip.codes == ("80E21007",)
