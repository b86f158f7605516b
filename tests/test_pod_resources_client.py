"""The PodResources client against the kubelet stand-in: v1 first, v1alpha1 for old kubelets, no symlinks."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio.to_thread
import pytest
from log_records import records
from plugin_harness import FakeNode, registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from waiting import wait_for

from ascend_plugin.holdings.pod_resources import ContainerRef, PodResourcesClient
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
CLIENT = "ascend_plugin.holdings.pod_resources"


async def admitted(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, standin: PodResourcesStandIn
) -> None:
    """A plugin serves the stand-in; one pod is admitted with Ascend310-0."""
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await anyio.to_thread.run_sync(standin.admit, "ns", "pod", RESOURCE, ["Ascend310-0"])


async def test_v1_list_and_allocatable(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, pod_resources: PodResourcesStandIn
) -> None:
    await admitted(kubelet, node, plugin_dir, pod_resources)
    client = PodResourcesClient(pod_resources.socket)
    listing = await client.listing()
    assert listing is not None
    assert [entry.ref for entry in listing] == [ContainerRef("ns", "pod", "main")]
    assert [(entry.ref.pod_key, dict(entry.devices)) for entry in listing] == [
        (("ns", "pod"), {RESOURCE: ("Ascend310-0",)})
    ]
    assert client.version == "v1"
    allocatable = await client.allocatable()
    assert allocatable is not None
    assert allocatable[RESOURCE] == ("Ascend310-0",)
    assert pod_resources.calls == [
        "/v1.PodResourcesLister/List",
        "/v1.PodResourcesLister/GetAllocatableResources",
    ]


async def test_an_old_kubelet_is_asked_v1alpha1_and_said_so_once(
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = PodResourcesStandIn(kubelet, short_tmp / "old" / "kubelet.sock", versions=("v1alpha1",))
    old.start()
    try:
        await admitted(kubelet, node, plugin_dir, old)
        client = PodResourcesClient(old.socket)
        with caplog.at_level(logging.INFO, logger="ascend_plugin.holdings"):
            for _ in range(3):
                listing = await client.listing()
                assert listing is not None
                assert [(entry.ref.pod_key, dict(entry.devices)) for entry in listing] == [
                    (("ns", "pod"), {RESOURCE: ("Ascend310-0",)})
                ]
        assert client.version == "v1alpha1"
        # An old kubelet is worth a WARNING, once however often asked.
        said = records(caplog, CLIENT, pod_resources="v1alpha1")
        assert [record.levelno for record in said] == [logging.WARNING]
        assert await client.allocatable() is None
    finally:
        old.stop()


async def test_an_absent_socket_is_said_once_and_answers_none(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = PodResourcesClient(short_tmp / "nowhere" / "kubelet.sock")
    with caplog.at_level(logging.WARNING, logger="ascend_plugin.holdings"):
        assert await client.listing() is None
        assert await client.listing() is None
    assert client.problem.endswith("does not exist (is the kubelet's pod-resources directory mounted?)")
    (said,) = records(caplog, CLIENT, level=logging.WARNING)
    state = said.__dict__["pod_resources"]
    assert state.startswith("unavailable: ")
    assert "does not exist (is the kubelet's pod-resources directory mounted?)" in state  # what to check


async def test_a_symlink_is_refused(
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await admitted(kubelet, node, plugin_dir, pod_resources)
    link = short_tmp / "link.sock"
    link.symlink_to(pod_resources.socket)
    client = PodResourcesClient(link)
    with caplog.at_level(logging.WARNING, logger="ascend_plugin.holdings"):
        assert await client.listing() is None
    # The plugin's own holdings say theirs (no kubelet socket at its default path); this client says this.
    (said,) = [
        record
        for record in records(caplog, CLIENT, level=logging.WARNING)
        if str(link) in record.__dict__["pod_resources"]
    ]
    assert said.__dict__["pod_resources"].startswith("unavailable: ")
    assert f"{link} resolves to {pod_resources.socket}" in said.__dict__["pod_resources"]
    assert pod_resources.calls == []  # the kubelet was never asked through the link
