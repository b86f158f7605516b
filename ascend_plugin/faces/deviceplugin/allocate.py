"""Allocate's checks: the kubelet's device IDs, turned into offered devices or a refusal naming the bad one.

A restart, a stale checkpoint or a hand-made request can send anything: each ID's
form, uniqueness, presence and health are checked first. A container gets one
vNPU at most (the Ascend runtime mounts one per container, as Huawei's plugin says).
"""

from __future__ import annotations

from collections.abc import Sequence

from ascend_plugin.grpc_guard.refusals import BadRequest, CannotServe
from ascend_plugin.grpc_guard.status import listed
from ascend_plugin.naming import MAX_DEVICE_ID_LENGTH
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.book import OfferBook


def checked_devices(book: OfferBook, resource: str, device_ids: Sequence[str]) -> list[OfferedDevice]:
    """The devices named, in order; a refusal names the first bad ID and why."""
    devices = known_devices(book, resource, device_ids)
    for device in devices:
        _check_healthy(device)
    return devices


def known_devices(book: OfferBook, resource: str, device_ids: Sequence[str]) -> list[OfferedDevice]:
    """The devices named, healthy or not (a chooser's kubelet IDs only count); BadRequest names the first bad
    ID."""
    if not device_ids:
        raise BadRequest("empty", "the request names no device IDs")
    offered = book.devices(resource)
    forms = list(dict.fromkeys(device.form for device in offered))
    seen: set[str] = set()
    devices = []
    for device_id in device_ids:
        if len(device_id) > MAX_DEVICE_ID_LENGTH or not any(form.pattern.match(device_id) for form in forms):
            expected = " or ".join(f"'{form}'" for form in forms) or "no device (none is offered)"
            raise BadRequest(
                "malformed",
                f"device ID {device_id[:80]!r} is malformed; expected {expected} for {resource}",
            )
        if device_id in seen:
            raise BadRequest("duplicate", f"device ID {device_id!r} appears twice")
        seen.add(device_id)
        device = book.get(resource, device_id)
        if device is None:
            raise BadRequest(
                "unknown",
                f"device ID {device_id!r} is not on this node; known devices: {_ids(offered)}",
            )
        devices.append(device)
    virtual = [device.id for device in devices if device.virtual]
    if len(virtual) > 1:
        raise BadRequest(
            "vnpus",
            f"the request names {len(virtual)} vNPUs ({listed(virtual)}); a container can hold one "
            "vNPU only (the Ascend runtime mounts one virtual device per container): request 1 of "
            f"{resource}",
        )
    return devices


def chosen_devices(
    book: OfferBook, resource: str, real_ids: Sequence[str], chooser: str
) -> list[OfferedDevice]:
    """The real devices a chooser named, each offered and healthy; CannotServe otherwise."""
    devices = []
    for real_id in real_ids:
        device = book.get(resource, real_id)
        if device is None:
            raise CannotServe(
                "chosen-unknown",
                f"{chooser} chose {real_id!r}, which this node does not offer as {resource}; "
                f"known devices: {_ids(book.devices(resource))}",
            )
        _check_healthy(device, f"{chooser} chose {real_id}, but it")
        devices.append(device)
    return devices


def _ids(devices: Sequence[OfferedDevice]) -> str:
    """The devices' IDs for a refusal: the first ten and how many more (a node may offer hundreds)."""
    return listed([device.id for device in devices])


def _check_healthy(device: OfferedDevice, subject: str = "") -> None:
    if not device.healthy:
        raise CannotServe(
            "unhealthy",
            f"{subject or 'device ' + device.id} is unhealthy: {device.reason}",
        )
