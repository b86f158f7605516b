"""Volcano mode across a plugin restart, and the health the kubelet sees through the kubelet-ID map.

A restart between Allocate and the annotations must lose nothing: the new
plugin learns from PodResources which kubelet IDs the pod holds, from the pod
which chips stand behind them, writes the annotations, and reports the real
chips' health on those kubelet IDs.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import health_of, registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import (
    RESOURCE,
    add_node_object,
    annotations_of,
    make_node,
    scenario,
    synced,
    volcano_pod,
    volcano_settings,
)
from waiting import until, wait_for

from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


def unhealthy(kubelet: KubeletStandIn) -> set[str]:
    return {device for device, health in kubelet.health(RESOURCE).items() if health == "Unhealthy"}


async def test_a_restart_before_the_annotations_rebuilds_the_map_from_pod_resources(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("trainer", [2, 3], 100))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket, health_interval=0.05)
    apiserver.inject(503, "patch", "pods")  # nothing the first plugin writes lands
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        await anyio.to_thread.run_sync(
            pod_resources.admit, "default", "trainer", RESOURCE, ["Ascend910-0", "Ascend910-1"]
        )
    assert "huawei.com/AscendReal" not in annotations_of(apiserver, "trainer")
    apiserver.clear_injections()

    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE, times=2), "re-registration")
        await until(lambda: "huawei.com/AscendReal" in annotations_of(apiserver, "trainer"), "annotations")
        written = annotations_of(apiserver, "trainer")
        assert written["huawei.com/kltDev"] == "Ascend910-0,Ascend910-1"
        assert written["huawei.com/AscendReal"] == "Ascend910-2,Ascend910-3"
        assert written[PREDICATE_TIME] == str(CONSUMED)
        assert app.face is not None
        assert app.face.chooser is not None
        assert dict(app.face.chooser.assignments.mapping(RESOURCE)) == {
            "Ascend910-0": "Ascend910-2",
            "Ascend910-1": "Ascend910-3",
        }

        # Chip 3 faults: the kubelet ID standing for it turns unhealthy, nothing else.
        node.write(scenario(faulty=(3,)))
        await wait_for(kubelet, lambda k: unhealthy(k) == {"Ascend910-1"}, "kubelet ID 1 unhealthy")
        assert health_of(RESOURCE, "Ascend910-3")(kubelet) == "Healthy"
        node.write(scenario())
        await wait_for(kubelet, lambda k: not unhealthy(k), "healthy again")


async def test_health_on_kubelet_ids_follows_the_chips_handed_over(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("a", [6], 1))
    apiserver.put("pods", volcano_pod("b", [0], 2))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket, health_interval=0.05)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        await anyio.to_thread.run_sync(pod_resources.admit, "default", "a", RESOURCE, ["Ascend910-0"])
        await anyio.to_thread.run_sync(pod_resources.admit, "default", "b", RESOURCE, ["Ascend910-1"])
        # Chip 6 (pod a's) faults: pod a's kubelet ID, Ascend910-0, is the one reported unhealthy;
        # chip 0 (pod b's) stays healthy under Ascend910-1.
        node.write(scenario(faulty=(6,)))
        await wait_for(kubelet, lambda k: unhealthy(k) == {"Ascend910-0"}, "pod a's kubelet ID unhealthy")
        # Chip 0 too: now pod b's kubelet ID.
        node.write(scenario(faulty=(0, 6)))
        await wait_for(kubelet, lambda k: unhealthy(k) == {"Ascend910-0", "Ascend910-1"}, "pod b's too")
        # The kubelet's count of healthy IDs is the count of healthy chips.
        assert kubelet.resources[RESOURCE].allocatable == 6
