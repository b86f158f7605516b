"""Faults on a 950 node mark exactly the chip they are about: polled, evented, and a UB port's link down.

The C fake plays the Atlas 850 through DCMI v2, whose logical ids are four off
the physical ones: a fault read or delivered for the wrong id would mark
another chip. A fault the polls read (the driver without a subscription) and
one only an event tells (``dcmiv2_subscribe_fault_event``'s callback) each take
exactly their chip out. A UB port's link down (``81B18603``, NotHandleFault by
itself) comes with Huawei's ``020001002`` (SeparateNPU) both ways.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from node_950 import CHIPS, RESOURCE, host, node_950
from plugin_harness import player_settings, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.families.ascend950 import UB_ROUTE_LOST

pytestmark = pytest.mark.anyio

SEPARATE = "80E01801"
UB_DOWN = "81B18603"


def only_out(*phys: int) -> dict[str, str]:
    return {f"npu-{phy}": "Unhealthy" if phy in phys else "Healthy" for phy in range(CHIPS)}


async def test_a_polled_fault_marks_its_chip(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    polled_only = {"missing": ["subscribe_faults"]}  # a driver without the subscription: polls alone
    c_fake.update(node_950(**polled_only))
    async with running_plugin(player_settings(c_fake, plugin_dir, host(short_tmp / "host"))) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert app.monitor is not None
        assert not app.monitor.subscribed
        c_fake.update(node_950({5: {"fault_codes": [SEPARATE]}}, **polled_only))
        await wait_for(kubelet, lambda k: k.health(RESOURCE) == only_out(5), "npu-5 out, the others in")
        c_fake.update(node_950({6: {"fault_codes": [UB_DOWN]}}, **polled_only))
        await wait_for(kubelet, lambda k: k.health(RESOURCE) == only_out(6), "npu-6 out for its UB port")
        assert app.inventory is not None
        state = app.inventory.get(6)
        assert state is not None
        assert {fault.code for fault in state.health.faults} >= {0x81B18603, UB_ROUTE_LOST}


async def test_an_evented_fault_marks_its_chip(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    c_fake.update(node_950())
    async with running_plugin(player_settings(c_fake, plugin_dir, host(short_tmp / "host"))) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert app.monitor is not None
        await wait_for(kubelet, lambda _: app.monitor is not None and app.monitor.subscribed, "subscribed")
        # Only the event says it: the chip's polled codes stay empty.
        c_fake.update(node_950({2: {"events": [{"serial": 1, "code": SEPARATE}]}}))
        await wait_for(kubelet, lambda k: k.health(RESOURCE) == only_out(2), "npu-2 out, the others in")
        ub = [{"serial": 1, "code": SEPARATE}, {"serial": 2, "code": SEPARATE, "assertion": 0}]
        c_fake.update(node_950({2: {"events": ub}, 7: {"events": [{"serial": 1, "code": UB_DOWN}]}}))
        await wait_for(kubelet, lambda k: k.health(RESOURCE) == only_out(7), "npu-7 out for its UB port")
        back = [{"serial": 1, "code": UB_DOWN}, {"serial": 2, "code": UB_DOWN, "assertion": 0}]
        c_fake.update(node_950({2: {"events": ub}, 7: {"events": back}}))
        await wait_for(kubelet, lambda k: k.health(RESOURCE) == only_out(), "npu-7 back: its port is up")
