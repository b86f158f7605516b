"""One API client per process, whatever faces talk to the API server: Volcano mode and the publishers,
the DRA driver and the publishers each share it (one connection pool, one line saying where it is).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import RESOURCE, add_node_object, make_node, synced, volcano_settings
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

CLIENT = "ascend_plugin.kubeapi.client"


def connections(caplog: pytest.LogCaptureFixture) -> int:
    """The API clients made (while the fixtures started the plugin too): each says where the server is."""
    said = [*caplog.get_records("setup"), *caplog.records]
    return sum(
        1 for r in said if r.name == CLIENT and r.getMessage().startswith("talking to the API server at")
    )


@pytest.fixture
def client_lines(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The client's INFO lines captured, from before the plugin starts (ask for it first)."""
    caplog.set_level(logging.INFO, CLIENT)
    return caplog


async def test_volcano_mode_and_the_publishers_share_one_client(
    client_lines: pytest.LogCaptureFixture,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> None:
    add_node_object(apiserver)
    settings = volcano_settings(
        make_node(short_tmp), plugin_dir, kubeconfig, pod_resources.socket, node_labels=True
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: synced(app), "Volcano's pod cache")
        await until(lambda: "accelerator" in apiserver.node_labels("atlas-800t-a2"), "the node labels")
        assert connections(client_lines) == 1
        assert app.kube_client.connects == 1


async def test_the_dra_driver_and_the_publishers_share_one_client(
    client_lines: pytest.LogCaptureFixture, dra_driver: PluginApp, apiserver: FakeApiServer
) -> None:
    await until(apiserver.slices, "the driver's ResourceSlices")
    await until(lambda: apiserver.requests_of("list", "configmaps"), "a publisher following a ConfigMap")
    assert connections(client_lines) == 1
    assert dra_driver.kube_client.connects == 1
