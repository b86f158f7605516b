"""AI Core/Vector bus errors within 5 s of an HBM multi-bit error are dropped, where Huawei drops them."""

from __future__ import annotations

from fault_policy_harness import Node, configured

from ascend_plugin.fault_policy.faults import AIC_BUS_ERROR, AIV_BUS_ERROR, HBM_MULTI_BIT, FaultLevel

L = FaultLevel
HBM_RULE = {"EventId": ["80E01801"], "FaultTimeout": 30, "RecoverTimeout": 0, "FaultHandling": "SeparateNPU"}


def dropping() -> Node:
    return Node(configured(customization={"FaultDuration": [HBM_RULE]}))


def test_without_a_duration_entry_for_hbm_bus_errors_apply_at_once() -> None:
    node = Node()
    node.raised(0, AIC_BUS_ERROR)
    assert node.judge(0).chip.codes == ("80C98009",)


def test_a_bus_error_after_an_hbm_error_is_dropped_and_stays_dropped_while_listed() -> None:
    node = dropping()
    node.raised(0, HBM_MULTI_BIT)
    node.clock.advance(2)
    node.raised(0, AIC_BUS_ERROR)
    assert node.judge(0).chip.codes == ("80E01801",)
    node.clock.advance(10)
    node.polled(0, HBM_MULTI_BIT, AIC_BUS_ERROR)  # the driver still lists it: still the HBM error's
    assert node.at(10).chip.codes == ("80E01801",)
    node.polled(0, HBM_MULTI_BIT)  # gone; a new one later is the chip's own
    node.clock.advance(20)
    node.raised(0, AIV_BUS_ERROR)
    assert node.at(5.001).chip.codes == ("80E01801", "80CB8009")


def test_a_bus_error_before_an_hbm_error_is_held_and_then_dropped() -> None:
    node = dropping()
    node.raised(0, AIC_BUS_ERROR)
    assert node.judge(0).chip.codes == ()  # held for 5 s
    node.clock.advance(4.9)
    node.raised(0, HBM_MULTI_BIT)
    assert node.at(10).chip.codes == ("80E01801",)


def test_a_bus_error_with_no_hbm_error_near_applies_5_s_late_with_its_own_time() -> None:
    node = dropping()
    node.raised(0, AIC_BUS_ERROR)
    raised_at = node.clock.ms
    assert node.policy.wake_at() == raised_at + 5001
    assert node.at(5).chip.codes == ()
    judged = node.at(0.001)
    assert judged.chip.codes == ("80C98009",)
    assert judged.chip.times["80C98009"].fault_time == raised_at
    assert judged.level is L.RestartRequest


def test_the_recovery_of_an_applied_bus_error_is_never_held_back() -> None:
    node = dropping()
    node.raised(0, AIC_BUS_ERROR)
    node.clock.advance(6)
    assert node.judge(0).chip.codes == ("80C98009",)
    node.raised(0, HBM_MULTI_BIT)
    node.cleared(0, AIC_BUS_ERROR)
    assert node.judge(0).chip.codes == ("80E01801",)


def test_a_bus_error_that_comes_and_goes_while_held_leaves_nothing_behind() -> None:
    node = dropping()
    node.raised(0, AIC_BUS_ERROR)
    node.clock.advance(1)
    node.cleared(0, AIC_BUS_ERROR)
    assert node.at(10).chip.codes == ()
    node.raised(0, AIC_BUS_ERROR)
    node.clock.advance(1)
    node.raised(0, HBM_MULTI_BIT)
    node.cleared(0, AIC_BUS_ERROR)
    assert node.at(10).chip.codes == ("80E01801",)
    node.raised(0, AIC_BUS_ERROR)  # dropped earlier, cleared since: judged afresh (and near no HBM error now)
    assert node.at(10).chip.codes == ("80E01801", "80C98009")


def test_turning_the_rule_off_applies_what_is_held() -> None:
    node = dropping()
    node.raised(0, AIV_BUS_ERROR)
    node.policy.reconfigure(configured())
    assert node.judge(0).chip.codes == ("80CB8009",)
