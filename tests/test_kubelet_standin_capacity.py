"""The kubelet stand-in's node capacity: a resource whose plugin went away leaves after the grace period."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


@pytest.fixture
def patient_kubelet(plugin_dir: Path) -> Iterator[KubeletStandIn]:
    """A stand-in that keeps a lost resource for an hour, as a kubelet keeps it for its grace period."""
    standin = KubeletStandIn(plugin_dir, stop_grace_period=3600)
    standin.start()
    yield standin
    standin.stop()


async def test_a_lost_resource_stays_unallocatable_during_the_grace_period(
    patient_kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(patient_kubelet, registered(RESOURCE), "registration")
        assert patient_kubelet.node_capacity() == {RESOURCE: 1}
    await wait_for(patient_kubelet, lambda k: not k.resources[RESOURCE].stream_open, "stream ended")
    assert patient_kubelet.node_capacity() == {RESOURCE: 1}
    assert patient_kubelet.resources[RESOURCE].allocatable == 0


async def test_without_a_grace_period_a_lost_resource_leaves_at_once(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert kubelet.node_capacity() == {RESOURCE: 1}
    await wait_for(kubelet, lambda k: k.node_capacity() == {}, "the resource dropped")
