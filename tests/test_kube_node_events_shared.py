"""Every Event of the node goes through one sender: the "node events" publisher posts them all.

``run_kube`` over the loopback API server through the real kubernetes-asyncio
client, node events and the device-info ConfigMap on: a start-up notice, a
chip's transition and an escalation released by an operator are each posted
once, by the one sender the publishers share (one queue, one rate limit). With
node events off, the release still happens and nothing is posted.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, judged_node, running
from waiting import until

from ascend_plugin.faces.kube.publishers import run_kube
from ascend_plugin.offers.node_offers import Notice

pytestmark = pytest.mark.anyio

NAME = f"mindx-dl-deviceinfo-{NODE}"


def _reasons(apiserver: FakeApiServer) -> list[str]:
    return sorted(event["reason"] for event in apiserver.events())


def _device_info(apiserver: FakeApiServer) -> dict[str, str]:
    configmap = apiserver.get("configmaps", NAME, "kube-system")
    return {} if configmap is None else dict(configmap["data"])


def _separated_before(apiserver: FakeApiServer) -> None:
    """What a plugin before this one separated: chip 0, read back into the policy at start."""
    data = {"ManuallySeparateNPU": "Ascend910-0", "UpgradeFaultReason": "{}"}
    apiserver.put("configmaps", {"metadata": {"name": NAME, "namespace": "kube-system"}, "data": data})


def _release_by_hand(apiserver: FakeApiServer) -> None:
    configmap = apiserver.get("configmaps", NAME, "kube-system")
    assert configmap is not None
    configmap["data"]["ManuallySeparateNPU"] = ""
    apiserver.put("configmaps", configmap)


@pytest.mark.parametrize("node_events", [True, False])
async def test_notices_transitions_and_releases_share_the_nodes_one_sender(
    apiserver: FakeApiServer, kubeconfig: Path, short_tmp: Path, node_events: bool
) -> None:
    apiserver.add_node(NODE)
    node = judged_node(short_tmp, kubeconfig, node_events=node_events)
    inventory, faults = node.inventory, node.faults
    node.judged.judge()
    notice = Notice("AscendOffersNarrowed", "shares are off on this node", logging.WARNING)
    inputs = node.inputs(notices=(notice,))
    _separated_before(apiserver)
    async with running(lambda: run_kube(inputs)):
        await until(lambda: faults.policy.manually_separated() == (0,), "the separation read back")
        await until(lambda: not inventory.chips()[0].healthy, "chip 0 judged separated")
        _release_by_hand(apiserver)
        await until(lambda: faults.policy.manually_separated() == (), "the operator's release")
        await until(lambda: inventory.chips()[0].healthy, "chip 0 healthy again")
        if node_events:
            expected = ["AscendOffersNarrowed", "NPUEscalationReleased", "NPUHealthy", "NPUUnhealthy"]
            await until(lambda: _reasons(apiserver) == expected, "every Event, each once")
    assert _device_info(apiserver)["ManuallySeparateNPU"] == ""
    if not node_events:
        assert apiserver.events() == []
