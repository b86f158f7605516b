"""The wire check of device-plugin requests, as a pure function: what it refuses and what it lets through."""

from __future__ import annotations

import pytest
from grpclib.const import Status

from ascend_plugin.faces.deviceplugin.request_shapes import REQUEST_SHAPES, request_limits
from ascend_plugin.grpc_guard import wire_check
from ascend_plugin.grpc_guard.refusals import BadRequest
from ascend_plugin.grpc_guard.wire_check import RequestLimits, check_request
from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    ContainerAllocateRequest,
    ContainerPreferredAllocationRequest,
    DevicePluginBase,
    Empty,
    PreferredAllocationRequest,
    PreStartContainerRequest,
)

LIMITS = request_limits("huawei.com/Ascend910", 8, chips=8)
IDS = [f"Ascend910-{n}" for n in range(8)]
GPA = (REQUEST_SHAPES[PreferredAllocationRequest], LIMITS)


def refusal(message: object, limits: RequestLimits = LIMITS) -> str:
    with pytest.raises(BadRequest) as refused:
        check_request(bytes(message), REQUEST_SHAPES[type(message)], limits)  # type: ignore[call-overload]
    assert (refused.value.label, refused.value.status) == ("shape", Status.INVALID_ARGUMENT)
    return refused.value.reason


def test_every_request_of_the_service_has_a_shape() -> None:
    request_types = {method.request_type for method in DevicePluginBase().__mapping__().values()}
    assert request_types == set(REQUEST_SHAPES)


def test_the_shapes_know_every_field_of_the_generated_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no unknown field allowed, requests with every field set still pass: no field is missing."""
    monkeypatch.setattr(wire_check, "MAX_UNKNOWN_FIELDS", 0)
    full = [
        Empty(),
        AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=IDS)] * 8),
        PreferredAllocationRequest(
            container_requests=[
                ContainerPreferredAllocationRequest(
                    available_deviceIDs=IDS, must_include_deviceIDs=IDS[:2], allocation_size=4
                )
            ]
        ),
        PreStartContainerRequest(devices_ids=IDS),
    ]
    for message in full:
        check_request(bytes(message), REQUEST_SHAPES[type(message)], LIMITS)


def test_a_negative_allocation_size_is_a_ten_byte_varint_and_passes() -> None:
    message = PreferredAllocationRequest(
        container_requests=[ContainerPreferredAllocationRequest(available_deviceIDs=IDS, allocation_size=-1)]
    )
    check_request(bytes(message), REQUEST_SHAPES[PreferredAllocationRequest], LIMITS)


def test_entries_beyond_the_device_count_are_refused_naming_the_field_and_the_count() -> None:
    nine = [*IDS, "Ascend910-8"]
    assert refusal(AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=nine)])) == (
        "AllocateRequest.container_requests[0].devices_ids has more entries than the 8 "
        "huawei.com/Ascend910 device(s) on this node"
    )
    assert refusal(PreStartContainerRequest(devices_ids=nine)).startswith(
        "PreStartContainerRequest.devices_ids has"
    )
    containers = [ContainerAllocateRequest(devices_ids=["Ascend910-0"])] * 9
    assert refusal(AllocateRequest(container_requests=containers)).startswith(
        "AllocateRequest.container_requests has more entries than the 8"
    )


def test_preferred_allocation_lists_are_bounded_by_what_a_kubelet_can_have_been_told_of() -> None:
    """Its view lags ours: more IDs than the resource has now pass, up to 100 per chip of the node."""
    view = [f"Ascend910-{n}" for n in range(800)]
    lagging = ContainerPreferredAllocationRequest(available_deviceIDs=view, must_include_deviceIDs=view)
    check_request(bytes(PreferredAllocationRequest(container_requests=[lagging])), *GPA)
    beyond = ContainerPreferredAllocationRequest(available_deviceIDs=[*view, "Ascend910-800"])
    assert refusal(PreferredAllocationRequest(container_requests=[beyond])) == (
        "PreferredAllocationRequest.container_requests[0].available_deviceIDs has more entries than the "
        "800 huawei.com/Ascend910 devices a kubelet can have been told of on this node (100 per chip)"
    )


def test_a_resource_without_devices_still_takes_one_preference_request() -> None:
    """A resource that shrank to nothing may still be asked about the devices the kubelet saw."""
    empty = request_limits("huawei.com/Ascend910", 0, chips=8)
    one = ContainerPreferredAllocationRequest(available_deviceIDs=IDS, allocation_size=1)
    check_request(bytes(PreferredAllocationRequest(container_requests=[one])), GPA[0], empty)
    assert refusal(PreferredAllocationRequest(container_requests=[one, one]), empty) == (
        "PreferredAllocationRequest.container_requests has more entries than one container "
        "(a kubelet asks for one at a time)"
    )


def test_an_id_over_50_characters_is_refused_with_its_start_and_length() -> None:
    message = AllocateRequest(
        container_requests=[ContainerAllocateRequest(devices_ids=["Ascend910-0", "y" * 64])]
    )
    assert refusal(message) == (
        "AllocateRequest.container_requests[0].devices_ids[1] ('yyyyyyyyyyyyyyyyyyyy'...) is 64 bytes long; "
        "device IDs have at most 50 characters"
    )


def test_unknown_fields_pass_within_their_allowance_and_not_beyond() -> None:
    def unknown(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    some = b"".join(unknown(9, b"new") for _ in range(wire_check.MAX_UNKNOWN_FIELDS))
    check_request(some, REQUEST_SHAPES[Empty], LIMITS)
    assert refusal_of(some + unknown(9, b"new"), Empty).startswith(
        "Empty carries more fields this plugin does not know (field 9) than a kubelet sends: 65 fields"
    )
    big = bytes([9 << 3 | 2]) + b"\x81\x80\x04" + b"z" * 65537  # one unknown field of 64 KiB + 1
    assert "65541 bytes (at most 64 fields and 65536 bytes)" in refusal_of(big, Empty)


def refusal_of(data: bytes, message_type: type) -> str:
    with pytest.raises(BadRequest) as refused:
        check_request(data, REQUEST_SHAPES[message_type], LIMITS)
    assert (refused.value.label, refused.value.status) == ("shape", Status.INVALID_ARGUMENT)
    return refused.value.reason


def test_fixed_width_unknown_fields_are_skipped_and_their_truncation_caught() -> None:
    check_request(b"\x49" + b"\x00" * 8 + b"\x55" + b"\x00" * 4, REQUEST_SHAPES[Empty], LIMITS)
    assert (
        refusal_of(b"\x49\x00\x00", Empty)
        == "Empty is malformed: field 9 at byte 1 claims 8 bytes, 2 are left"
    )


def test_a_4_mb_message_of_one_byte_ids_is_refused_after_nine_of_them() -> None:
    """The case betterproto2 needs 9 s for: the check stops at the first excess entry."""
    container = b"".join(b"\x0a\x01x" for _ in range(1_400_000))
    data = b"\x0a" + _varint(len(container)) + container
    assert len(data) > 4_000_000
    assert refusal_of(data, AllocateRequest).startswith(
        "AllocateRequest.container_requests[0].devices_ids has more entries than the 8"
    )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)
