"""After a reset the chip's next poll decides every code: what events raised or reported once is forgotten.

A hot reset, or the driver's reset-finished event (``8C2FA009``), re-initialises
the chip; a code an event put on it before says nothing of it now (Huawei's
plugin reads all codes again). :meth:`FaultPolicy.read_afresh` makes each
current code a polled one, so the poll that follows keeps what it lists and
clears the rest through the usual recovery, counters and clocks included.
"""

from __future__ import annotations

from fault_policy_harness import Node

from ascend_plugin.fault_policy.faults import FaultLevel as L

SEPARATE = 0x80E18402  # SeparateNPU, no rule
RESTART = 0x40F84E00  # RestartNPU, no rule
LINK_DOWN = 0x81078603


def test_the_poll_after_a_reset_clears_event_codes_it_does_not_list() -> None:
    node = Node()
    node.raised(0, SEPARATE)
    node.once(0, RESTART)
    node.polled(0)
    assert set(node.judge(0).chip.codes) == {"80E18402", "40F84E00"}  # polls never listed them
    node.policy.read_afresh(0)
    node.polled(0, RESTART)
    judged = node.judge(0)
    assert judged.chip.codes == ("40F84E00",)  # listed: now a polled code, held no longer than the polls say
    node.polled(0)
    assert node.judge(0).chip.codes == ()


def test_a_code_forgotten_after_a_reset_recovers_as_any_other() -> None:
    node = Node()
    node.raised(0, LINK_DOWN)
    node.clock.advance(21)
    assert node.judge(0).network_level is L.PreSeparateNPU  # FaultDuration: down longer than 20 s
    node.policy.read_afresh(0)
    node.polled(0)  # the link is up after the reset
    assert node.at(60).network_level is L.PreSeparateNPU
    assert node.at(0.001).network_level is L.NormalNPU  # clear longer than its RecoverTimeout


def test_other_chips_keep_their_codes() -> None:
    node = Node()
    node.raised(0, SEPARATE)
    node.raised(1, SEPARATE)
    node.policy.read_afresh(0)
    node.polled(0)
    node.polled(1)
    assert (node.judge(0).level, node.judge(1).level) == (L.NormalNPU, L.SeparateNPU)
