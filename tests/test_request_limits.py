"""What a client sends the plugin's socket is bounded: size, entries, ID length, bytes that are no request.

A raw grpcio client on the plugin's socket sends what no kubelet would: a 5 MB
message, 10,000 device IDs, 10,000 container requests, bytes that are not
protobuf. Each gets its status (RESOURCE_EXHAUSTED, INVALID_ARGUMENT) with a
short reason, the log says so in one rate-limited line and never with a
traceback, and the plugin serves the kubelet as before.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import grpc
import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.grpc_guard.server import MAX_MESSAGE_BYTES
from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    ContainerAllocateRequest,
    ContainerPreferredAllocationRequest,
    PreferredAllocationRequest,
)
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
REFUSALS = "ascend_plugin.grpc_guard.refusal_log"


@dataclass
class Plugin:
    app: PluginApp
    socket: Path
    kubelet: KubeletStandIn

    def call(self, method: str, payload: bytes) -> grpc.RpcError | bytes:
        """One raw call on the plugin's socket: the answer's bytes, or the error."""
        with grpc.insecure_channel(f"unix:{self.socket}") as channel:
            try:
                answer: bytes = channel.unary_unary(f"/v1beta1.DevicePlugin/{method}")(payload, timeout=10)
            except grpc.RpcError as error:
                return error
        return answer

    def calls(self, method: str, payload: bytes, times: int) -> list[grpc.StatusCode]:
        """The same raw call ``times`` times on one connection; the status of each."""
        codes = []
        with grpc.insecure_channel(f"unix:{self.socket}") as channel:
            call = channel.unary_unary(f"/v1beta1.DevicePlugin/{method}")
            for _ in range(times):
                try:
                    call(payload, timeout=10)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as error:
                    codes.append(error.code())
        return codes

    async def refused(self, method: str, payload: bytes) -> grpc.RpcError:
        answer = await anyio.to_thread.run_sync(self.call, method, payload)
        assert isinstance(answer, grpc.RpcError), f"{method} answered {answer!r}"
        return answer

    async def still_serves(self) -> None:
        response = await anyio.to_thread.run_sync(self.kubelet.allocate, RESOURCE, ["Ascend310-0"])
        assert response.container_responses[0].devices


@pytest.fixture
async def plugin(kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path) -> AsyncIterator[Plugin]:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        yield Plugin(app, plugin_dir / "Ascend310.sock", kubelet)


def allocate(*containers: list[str]) -> bytes:
    return bytes(
        AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=ids) for ids in containers])
    )


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == REFUSALS]


async def test_a_5_mb_message_is_refused_from_its_length_prefix(
    plugin: Plugin, caplog: pytest.LogCaptureFixture
) -> None:
    five_mb = allocate(["x" * (5 * 1024 * 1024)])
    error = await plugin.refused("Allocate", five_mb)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() == (
        f"a message of {len(five_mb)} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes "
        "(4 MiB, the most a kubelet sends)"
    )
    # One byte under the limit is read, then refused by the request check (the ID is too long).
    at_limit = allocate(["x" * (MAX_MESSAGE_BYTES - 16)])
    assert len(at_limit) <= MAX_MESSAGE_BYTES
    error = await plugin.refused("Allocate", at_limit)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "device IDs have at most 50 characters" in error.details()
    await plugin.still_serves()
    [line] = refusal_lines(caplog)  # the second refusal came from the same peer within 10 s
    assert line.__dict__["status"] == "RESOURCE_EXHAUSTED"
    assert not any(record.exc_info for record in caplog.records)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x0a\xff\x01", "AllocateRequest is malformed: field 1 at byte 1 claims 255 bytes, 0 are left"),
        (b"\x0b\x00", "AllocateRequest is malformed: field 1 has wire type 3 at byte 0"),
        (b"\x00\x01", "AllocateRequest is malformed: field number 0 at byte 0"),
        (b"\x0a", "AllocateRequest is malformed: a number runs past the end at byte 1"),
        (b"\x08\x01", "AllocateRequest.container_requests is malformed: wire type 0 at byte 0, expected 2"),
        (
            b"\x0a\x03\x0a\x01\xff",
            "AllocateRequest.container_requests[0].devices_ids[0] is malformed: not UTF-8 (b'\\xff')",
        ),
        (b"\x10" + b"\xff" * 11, "AllocateRequest is malformed: a number longer than 10 bytes at byte 1"),
    ],
)
async def test_malformed_bytes_get_invalid_argument_with_a_short_reason_and_no_traceback(
    plugin: Plugin, caplog: pytest.LogCaptureFixture, payload: bytes, reason: str
) -> None:
    error = await plugin.refused("Allocate", payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == reason
    await plugin.still_serves()
    [line] = refusal_lines(caplog)
    assert line.__dict__["peer"].startswith("pid ")
    assert (line.__dict__["status"], line.__dict__["reason"]) == ("INVALID_ARGUMENT", "shape")
    assert not any(record.exc_info for record in caplog.records), "a traceback was logged"
    assert not [record for record in caplog.records if record.name.startswith("grpclib")]


async def test_a_flood_of_bad_calls_logs_one_line_per_peer_per_10_s_with_the_count(
    plugin: Plugin, caplog: pytest.LogCaptureFixture
) -> None:
    assert plugin.app.face is not None
    now = [1000.0]
    plugin.app.face.servers[RESOURCE].registrar.endpoint.refusals.clock = lambda: now[0]

    codes = await anyio.to_thread.run_sync(plugin.calls, "Allocate", b"\x0a\xff\x01", 2000)
    assert set(codes) == {grpc.StatusCode.INVALID_ARGUMENT}
    assert len(refusal_lines(caplog)) == 1

    now[0] += 9.9  # still within the 10 s of the first line
    await plugin.refused("Allocate", b"\x00\x01")
    assert len(refusal_lines(caplog)) == 1
    now[0] += 0.1
    await plugin.refused("GetPreferredAllocation", b"\x00\x01")
    _, second = refusal_lines(caplog)
    assert second.__dict__["suppressed"] == 2000
    await plugin.still_serves()


async def test_10000_ids_or_container_requests_are_refused_before_any_work_on_them(
    plugin: Plugin,
) -> None:
    many_ids = [f"Ascend310-{n}" for n in range(10_000)]
    expected = "has more entries than the 1 huawei.com/Ascend310 device(s) on this node"

    error = await plugin.refused("Allocate", allocate(many_ids))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == f"AllocateRequest.container_requests[0].devices_ids {expected}"

    error = await plugin.refused("Allocate", allocate(*[["Ascend310-0"]] * 10_000))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == f"AllocateRequest.container_requests {expected}"

    preferred = PreferredAllocationRequest(
        container_requests=[
            ContainerPreferredAllocationRequest(available_deviceIDs=many_ids, allocation_size=1)
        ]
    )
    error = await plugin.refused("GetPreferredAllocation", bytes(preferred))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "PreferredAllocationRequest.container_requests[0].available_deviceIDs has more entries than the "
        "100 huawei.com/Ascend310 devices a kubelet can have been told of on this node (100 per chip)"
    )
    await plugin.still_serves()


@pytest.mark.parametrize(
    ("device_id", "reason"),
    [
        # Over 50 characters: refused on the wire, before decoding.
        ("x" * 51, "AllocateRequest.container_requests[0].devices_ids[0] ('xxxxxxxxxxxxxxxxxxxx'...) is 51"),
        # 50 pass the wire and meet Allocate's own check, which names the forms it expects.
        ("x" * 50, "is malformed; expected 'Ascend310-<physical id>' for huawei.com/Ascend310"),
    ],
)
async def test_device_ids_over_50_characters_are_refused_on_the_wire(
    plugin: Plugin, device_id: str, reason: str
) -> None:
    error = await plugin.refused("Allocate", allocate([device_id]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason in error.details()
    await plugin.still_serves()
