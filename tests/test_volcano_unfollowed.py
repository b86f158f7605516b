"""Volcano mode off, yet Volcano chose the chips of pods on this node: a warning, an Event, /readyz, doctor.

This is what replacing a ``-volcanoType=true`` deployment of Huawei's plugin and
leaving ``volcano`` at its default looks like: the pods run on the kubelet's
pick and get no rank table. The plugin reads each pod holding its chips once
and says so loudly, until those pods end; a pod Volcano did not place is quiet.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import NODE, RESOURCE, add_node_object, make_node, volcano_pod, volcano_settings
from waiting import until, wait_for

from ascend_plugin.faces.volcano.unfollowed import REASON
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio


def plain_pod(name: str) -> dict[str, object]:
    """A pod the default scheduler placed: no Volcano annotation."""
    pod = volcano_pod(name, None, None)
    pod["spec"]["schedulerName"] = "default-scheduler"  # type: ignore[index]
    return pod


async def test_a_pod_volcano_placed_is_said_until_it_ends(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_node_object(apiserver)
    node = make_node(short_tmp)
    apiserver.put("pods", volcano_pod("trainer-0", [2, 3], 1700000000))
    apiserver.put("pods", plain_pod("notebook"))
    # Volcano mode off (the default), the device-info ConfigMap on (Volcano schedules from it).
    settings = volcano_settings(
        node,
        plugin_dir,
        kubeconfig,
        pod_resources.socket,
        volcano=False,
        device_info_configmap=True,
        node_events=True,
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await anyio.to_thread.run_sync(pod_resources.admit, "default", "notebook", RESOURCE, ["Ascend910-5"])
        await anyio.to_thread.run_sync(
            pod_resources.admit, "default", "trainer-0", RESOURCE, ["Ascend910-0", "Ascend910-1"]
        )
        await until(lambda: "Volcano chose the chips" in app.readiness().detail, "/readyz says it", within=60)
        detail = app.readiness().detail
        assert app.readiness().ok is False
        assert "default/trainer-0 (huawei.com/Ascend910: Volcano chose Ascend910-2,Ascend910-3)" in detail
        assert "notebook" not in detail
        assert "volcano=true (--volcano, ASCEND_DP_VOLCANO=true, Helm settings.volcano: true)" in detail
        assert "docs/volcano.md#volcano-mode-off-but-volcano-schedules-here" in detail
        await until(
            lambda: any(event.get("reason") == REASON for event in apiserver.events()), "the node Event"
        )
        (event,) = [event for event in apiserver.events() if event.get("reason") == REASON]
        assert event["involvedObject"]["name"] == NODE
        assert "default/trainer-0" in event["message"]
        assert "default/trainer-0" in caplog.text

        pod_resources.remove("default", "trainer-0")
        await until(lambda: app.readiness().ok, "ready once the pod ended", within=60)
        gets = [request for request in apiserver.requests_of("get", "pods") if request.name == "notebook"]
        assert len(gets) == 1, "each pod is read once"


async def test_volcano_mode_on_reads_no_pod_for_it(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    """In Volcano mode the chips are Volcano's choice: nothing to warn about."""
    from ascend_plugin.faces.volcano import checks_volcano_choices

    node = make_node(short_tmp)
    settings = volcano_settings(
        node, plugin_dir, kubeconfig, pod_resources.socket, device_info_configmap=True
    )
    assert not checks_volcano_choices(settings)
    assert checks_volcano_choices(settings.model_copy(update={"volcano": False}))
    assert not checks_volcano_choices(
        settings.model_copy(update={"volcano": False, "device_info_configmap": False})
    )
