"""A refusal reaches the kubelet whole: every gRPC status message fits in 4 KiB, and says what to fix.

The status message travels in the HTTP/2 trailers; a grpcio client drops
trailers past 8 KiB at random and refuses them past 16 KiB, answering
``RESOURCE_EXHAUSTED ... metadata size exceeds hard limit`` instead of the
reason. Any message is cut to 4 KiB where the guarded socket ends the call,
and the messages that can grow with the node (Volcano's near misses, an
annotation quoted back) summarise instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from fake_apiserver import FakeApiServer
from grpclib import GRPCError
from grpclib.const import Status
from grpclib.metadata import encode_grpc_message
from plugin_harness import registered, running_plugin
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import RESOURCE, add_node_object, make_node, synced, volcano_pod, volcano_settings
from waiting import until, wait_for

from ascend_plugin.faces.deviceplugin.request_shapes import REQUEST_SHAPES, request_limits
from ascend_plugin.grpc_guard.server import GuardedEndpoint, RequestRules
from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    AllocateResponse,
    ContainerAllocateRequest,
    DevicePluginBase,
)
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

FOUR_KIB = 4096
# 120 KB of reason, some of it outside ASCII (percent-encoded, three bytes a character on the wire).
LONG_REASON = "chip " + "é" * 20_000 + "x" * 100_000


def encoded_size(details: str | None) -> int:
    return len(encode_grpc_message(details or ""))


class Refusing(DevicePluginBase):
    """A device-plugin service whose Allocate refuses with a 120 KB reason."""

    async def allocate(self, message: AllocateRequest) -> AllocateResponse:
        raise GRPCError(Status.FAILED_PRECONDITION, LONG_REASON)


@pytest.fixture
async def refusing_socket(short_tmp: Path) -> AsyncIterator[Path]:
    rules = RequestRules(REQUEST_SHAPES, lambda: request_limits("huawei.com/Ascend910", 8, chips=8))
    endpoint = GuardedEndpoint([Refusing()], short_tmp / "refusing.sock", "a refusing service", rules)
    await endpoint.start()
    yield endpoint.path
    await endpoint.stop()


async def test_any_status_message_is_cut_to_4_kib_where_the_call_ends(refusing_socket: Path) -> None:
    def call() -> grpc.RpcError:
        request = bytes(AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=["a"])]))
        with grpc.insecure_channel(f"unix:{refusing_socket}") as channel:
            try:
                channel.unary_unary("/v1beta1.DevicePlugin/Allocate")(request, timeout=10)
            except grpc.RpcError as error:
                return error
        raise AssertionError("the refusing service answered")

    error = await anyio.to_thread.run_sync(call)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION  # not RESOURCE_EXHAUSTED: the reason arrived
    details = error.details()
    assert encoded_size(details) <= FOUR_KIB
    assert details.startswith("chip éé")
    assert details.endswith(f" ... (cut to fit 4 KiB; {len(LONG_REASON)} characters in all)")


@dataclass
class VolcanoNode:
    """A Volcano-mode plugin's surroundings: the API server with its Node, the kubelet, PodResources."""

    apiserver: FakeApiServer
    kubeconfig: Path
    kubelet: KubeletStandIn
    pod_resources: PodResourcesStandIn
    root: Path
    plugin_dir: Path

    async def refusal(self, pod: str) -> str:
        """The plugin's refusal of an Allocate of one chip for ``pod``: its status message."""
        settings = volcano_settings(
            make_node(self.root), self.plugin_dir, self.kubeconfig, self.pod_resources.socket
        )
        async with running_plugin(settings) as app:
            await wait_for(self.kubelet, registered(RESOURCE), "registration")
            await until(lambda: synced(app), "the pod cache")
            with pytest.raises(grpc.RpcError) as refused:
                await anyio.to_thread.run_sync(
                    self.pod_resources.admit, "default", pod, RESOURCE, ["Ascend910-4"]
                )
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        return str(refused.value.details())


@pytest.fixture
def volcano_node(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
    plugin_dir: Path,
) -> VolcanoNode:
    add_node_object(apiserver)
    return VolcanoNode(apiserver, kubeconfig, kubelet, pod_resources, short_tmp, plugin_dir)


async def test_a_volcano_refusal_over_many_long_named_pods_is_summarised(volcano_node: VolcanoNode) -> None:
    padded = " " * 11_000 + "Ascend910-0,Ascend910-1"  # an 11 KB annotation naming two chips
    for index in range(40):
        name = f"{'n' * 240}-{index:02d}"
        pod = volcano_pod(name, None, 10 + index, request=1, extra_annotations={RESOURCE: padded})
        volcano_node.apiserver.put("pods", pod)
    for index in range(5):
        volcano_node.apiserver.put("pods", volcano_pod(f"served-{index}", [index], "18446744073709551615"))
    message = await volcano_node.refusal("nobody")
    assert encoded_size(message) <= FOUR_KIB
    assert "cut to fit" not in message  # short by itself, not by the cap
    assert "Passed over: 45 pod(s): " in message
    assert f"and 37 more: its {RESOURCE} annotation names 2 chip(s), the request is for 1" in message
    assert "default/served-0, default/served-1, default/served-2 and 2 more: already served" in message
    assert f"default/{'n' * 92}..." in message  # a 253-character name is cut, not dropped
    assert "     " not in message  # the annotation is not echoed


async def test_a_chosen_pod_whose_long_annotation_names_no_chip_here_is_quoted_by_its_start(
    volcano_node: VolcanoNode,
) -> None:
    annotation = "Ascend910-99" + " " * 20_000
    pod = volcano_pod("odd", None, 1, request=1, extra_annotations={RESOURCE: annotation})
    volcano_node.apiserver.put("pods", pod)
    message = await volcano_node.refusal("odd")
    assert encoded_size(message) <= 1024
    assert f"its {RESOURCE} annotation 'Ascend910-99" in message
    assert f"... ({len(annotation)} characters) names Ascend910-99, not on this node" in message
    assert "(devices: Ascend910-0, Ascend910-1," in message
