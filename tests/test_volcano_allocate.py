"""Volcano mode end to end: Allocate hands over the chips Volcano chose, pod by pod, in predicate order.

The plugin runs against the loopback API server and the kubelet stand-in; pods
are bound as Volcano binds them and admitted as the kubelet admits them.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import (
    NODE,
    RESOURCE,
    add_node_object,
    annotations_of,
    chip_id,
    make_node,
    pod_cache,
    scenario,
    synced,
    volcano_pod,
    volcano_settings,
)
from waiting import WAIT, until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.volcano.pod_cache import PodCache
from ascend_plugin.faces.volcano.pods import CONSUMED, PREDICATE_TIME
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


def _cache(app: PluginApp) -> PodCache:
    cache = pod_cache(app)
    assert cache is not None
    return cache


async def admit(pod_resources: PodResourcesStandIn, name: str, ids: list[str]):  # type: ignore[no-untyped-def]
    return await anyio.to_thread.run_sync(pod_resources.admit, "default", name, RESOURCE, ids)


async def test_two_pods_are_served_in_predicate_order_with_the_chips_volcano_chose(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    # Bound in the other order: "later" was predicated after "earlier".
    apiserver.put("pods", volcano_pod("later", [6, 7], 2000))
    apiserver.put("pods", volcano_pod("earlier", [2, 3], 1000))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        assert not kubelet.resources[RESOURCE].options.get_preferred_allocation_available

        first = await admit(pod_resources, "earlier", ["Ascend910-0", "Ascend910-1"])
        nodes = [device.host_path for device in first.container_responses[0].devices]
        assert "/dev/davinci2" in nodes
        assert "/dev/davinci3" in nodes
        assert "/dev/davinci0" not in nodes
        assert "/dev/davinci1" not in nodes

        second = await admit(pod_resources, "later", ["Ascend910-4", "Ascend910-5"])
        nodes = [device.host_path for device in second.container_responses[0].devices]
        assert {"/dev/davinci6", "/dev/davinci7"} <= set(nodes)
        assert not {"/dev/davinci4", "/dev/davinci5"} & set(nodes)

        # Both consumed in the API server, and each got what it holds written down.
        for name in ("earlier", "later"):
            await until(
                lambda name=name: annotations_of(apiserver, name).get(PREDICATE_TIME) == str(CONSUMED),
                f"{name} marked consumed",
            )
        await until(lambda: "huawei.com/AscendReal" in annotations_of(apiserver, "later"), "annotations")
        earlier, later = annotations_of(apiserver, "earlier"), annotations_of(apiserver, "later")
        await until(lambda: "huawei.com/AscendReal" in annotations_of(apiserver, "earlier"), "annotations")
        earlier = annotations_of(apiserver, "earlier")
        assert earlier["huawei.com/kltDev"] == "Ascend910-0,Ascend910-1"
        assert earlier["huawei.com/AscendReal"] == "Ascend910-2,Ascend910-3"
        assert later["huawei.com/kltDev"] == "Ascend910-4,Ascend910-5"
        assert later["huawei.com/AscendReal"] == "Ascend910-6,Ascend910-7"
        # Volcano's own annotation is never touched (downward-API workloads read it).
        assert earlier[RESOURCE] == "Ascend910-2,Ascend910-3"


async def test_a_consumed_pod_is_never_served_twice_even_before_its_mark_lands(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("only", [1], 500))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        patches = apiserver.inject(500, "patch", "pods")  # the mark cannot land yet
        await admit(pod_resources, "only", ["Ascend910-5"])
        with pytest.raises(grpc.RpcError) as refused:
            await admit(pod_resources, "second", ["Ascend910-6"])
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "default/only: already served (predicate-time consumed)" in str(refused.value.details())
        patches.times = patches.hits  # the API server takes patches again
        await until(
            lambda: annotations_of(apiserver, "only").get(PREDICATE_TIME) == str(CONSUMED), "the mark lands"
        )


@pytest.mark.parametrize("mode", ["runtime", "device", "cdi"])
async def test_every_handover_mode_hands_over_the_chosen_chips(
    mode: str,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("job", [4, 5], 42))
    settings = volcano_settings(
        node, plugin_dir, kubeconfig, pod_resources.socket, allocate_mode=mode, cdi_spec_dir=short_tmp / "cdi"
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        response = (await admit(pod_resources, "job", ["Ascend910-0", "Ascend910-7"])).container_responses[0]
    if mode == "runtime":
        assert response.envs["ASCEND_VISIBLE_DEVICES"] == "4,5"
        assert not response.devices
    elif mode == "device":
        own = sorted(
            d.host_path
            for d in response.devices
            if d.host_path.startswith("/dev/davinci") and d.host_path[-1].isdigit()
        )
        assert own == ["/dev/davinci4", "/dev/davinci5"]
    else:
        assert [device.name for device in response.cdi_devices] == ["huawei.com/npu=4", "huawei.com/npu=5"]


async def test_no_candidate_is_refused_naming_the_resource_the_count_and_each_near_miss(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("four", [0, 1, 2, 3], 10))
    apiserver.put("pods", volcano_pod("done", [4, 5], 11, phase="Succeeded"))
    apiserver.put("pods", volcano_pod("served", [6, 7], CONSUMED))
    apiserver.put("pods", volcano_pod("untimed", [4, 5], "soon"))
    apiserver.put("pods", volcano_pod("unplaced", None, None, request=2))
    apiserver.put("pods", volcano_pod("elsewhere", [4, 5], 12, node_name="another-node"))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        lists_before = len(apiserver.requests_of("list", "pods"))
        with pytest.raises(grpc.RpcError) as refused:
            await admit(pod_resources, "nobody", ["Ascend910-4", "Ascend910-5"])
        # The third attempt listed from the API server; the plugin serves on.
        assert len(apiserver.requests_of("list", "pods")) == lists_before + 1
        assert kubelet.resources[RESOURCE].stream_open
        assert app.face is not None
        assert app.face.stats.allocation_errors == {"no-candidate": 1}  # the metrics' reason label
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    message = str(refused.value.details())
    assert f"no pod on node {NODE} is waiting for 2 {RESOURCE} chip(s) after 3 attempts" in message
    assert f"default/four: its {RESOURCE} annotation names 4 chip(s), the request is for 2" in message
    assert "default/done: phase Succeeded" in message
    assert "default/served: already served (predicate-time consumed)" in message
    assert "default/untimed: no valid predicate-time ('soon')" in message
    assert f"default/unplaced: no {RESOURCE} annotation (Volcano has not placed it)" in message
    assert "elsewhere" not in message  # another node's pod is not even looked at
    assert ("default", "nobody") not in pod_resources.pods  # the kubelet records nothing for a refusal


async def test_with_the_api_server_down_the_cache_answers(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("job", [3], 7))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        await apiserver.stop()
        with anyio.fail_after(WAIT):
            response = await admit(pod_resources, "job", ["Ascend910-0"])
        assert "/dev/davinci3" in [device.host_path for device in response.container_responses[0].devices]
        # Back: the mark and the annotations catch up.
        await apiserver.start()
        await until(
            lambda: annotations_of(apiserver, "job").get("huawei.com/AscendReal") == chip_id(3), "annotations"
        )
        assert annotations_of(apiserver, "job")[PREDICATE_TIME] == str(CONSUMED)


async def test_a_request_for_every_chip_needs_no_pod(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket, allocate_mode="runtime")
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        everything = [chip_id(phy) for phy in range(8)]
        response = await admit(pod_resources, "whole", everything)
    assert response.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


async def test_a_chosen_chip_that_is_faulty_or_absent_is_refused_and_the_pod_consumed(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    node.write(scenario(faulty=(4,)))
    apiserver.put("pods", volcano_pod("on-a-fault", [4], 1))
    apiserver.put("pods", volcano_pod("elsewhere", [9], 2))
    settings = volcano_settings(node, plugin_dir, kubeconfig, pod_resources.socket)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "the pod cache")
        with pytest.raises(grpc.RpcError) as faulty:
            await admit(pod_resources, "on-a-fault", ["Ascend910-0"])
        with pytest.raises(grpc.RpcError) as absent:
            await admit(pod_resources, "elsewhere", ["Ascend910-0"])
        assert app.face is not None
        assert app.face.stats.allocation_errors == {"unhealthy": 1, "chosen-unknown": 1}
        for name in ("on-a-fault", "elsewhere"):
            await until(
                lambda name=name: annotations_of(apiserver, name).get(PREDICATE_TIME) == str(CONSUMED),
                f"{name} consumed: the next Allocate is for the next pod",
            )
    assert faulty.value.code() is absent.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "the scheduler chose Ascend910-4, but it is unhealthy" in str(faulty.value.details())
    assert "pod default/elsewhere was chosen for 1 huawei.com/Ascend910 chip(s)" in str(
        absent.value.details()
    )
    assert "names Ascend910-9, not on this node" in str(absent.value.details())
