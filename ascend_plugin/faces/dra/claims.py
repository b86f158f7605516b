"""A ResourceClaim as this node's driver prepares it: this driver's results in this node's pool, and
whether each device may be prepared now. Each problem is a ``CannotServe`` whose reason reaches the pod's
events, so it says what is wrong and what happens next. docs/dra.md, "Claims".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ascend_plugin.faces.dra.checkpoint import ClaimRef, PreparedClaim
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.names import device_name, request_base
from ascend_plugin.grpc_guard.refusals import CannotServe
from ascend_plugin.inventory.inventory import ChipState
from ascend_plugin.kubeapi.client import mapping_field, string_field
from ascend_plugin.offers.base import chip_health


@dataclass(frozen=True)
class AllocatedDevice:
    """One of this driver's results of a claim: a device of our pool (one share of it), for these requests."""

    device: str
    requests: tuple[str, ...]  # base request names, no "/subrequest"
    admin_access: bool = False
    share_id: str | None = None  # the allocator's ID of this share of a device several claims hold


def _results(claim: Mapping[str, object], ref: ClaimRef) -> list[Mapping[str, object]]:
    allocation = mapping_field(mapping_field(claim, "status"), "allocation")
    if not allocation:
        raise CannotServe(
            "claim", f"ResourceClaim {ref} is not allocated yet (no status.allocation); the kubelet retries"
        )
    results = mapping_field(allocation, "devices").get("results")
    return [result for result in results if isinstance(result, dict)] if isinstance(results, list) else []


def allocated_devices(
    claim: Mapping[str, object], ref: ClaimRef, driver: str, pool: str
) -> list[AllocatedDevice]:
    """This driver's devices of ``claim`` in ``pool``, in the allocation's order, one entry per device
    share; a result of ours in another node's pool is refused (allocated elsewhere)."""
    uid = string_field(mapping_field(claim, "metadata"), "uid")
    if uid != ref.uid:
        raise CannotServe(
            "claim",
            f"ResourceClaim {ref} has UID {uid or '(none)'}, but the kubelet asked for UID {ref.uid}: "
            "the claim was deleted and created again; the kubelet prepares the new one for its new pod",
        )
    ours = [result for result in _results(claim, ref) if string_field(result, "driver") == driver]
    elsewhere = sorted({string_field(r, "pool") for r in ours if string_field(r, "pool") != pool})
    if elsewhere:
        raise CannotServe(
            "claim",
            f"ResourceClaim {ref} is allocated devices of pool(s) {', '.join(elsewhere)}, not of this "
            f"node's pool {pool}: the kubelet of that node prepares them",
        )
    devices: dict[tuple[str, str | None], AllocatedDevice] = {}
    for result in ours:
        name = string_field(result, "device")
        share = string_field(result, "shareID") or None
        request = request_base(string_field(result, "request"))
        admin = result.get("adminAccess") is True
        earlier = devices.get((name, share))
        if earlier is None:
            devices[name, share] = AllocatedDevice(name, (request,), admin, share)
        elif request not in earlier.requests:
            devices[name, share] = AllocatedDevice(
                name, (*earlier.requests, request), earlier.admin_access and admin, share
            )
    return list(devices.values())


def checked_chip(
    catalog: DeviceCatalog, pool: str, ref: ClaimRef, device: AllocatedDevice, *, dynamic: bool
) -> ChipState:
    """The chip behind ``device``, if it may be prepared now; else CannotServe."""
    entry = catalog.find(device.device)
    state = catalog.inventory.get(entry.phy_id) if entry is not None else None
    if entry is None or state is None:
        known = ", ".join(device_name(s.phy_id) for s in catalog.inventory.chips()) or "none"
        raise CannotServe(
            "device",
            f"ResourceClaim {ref}: device {device.device} is not a device of pool {pool} (it has {known})",
        )
    if entry.template is not None and not dynamic:
        raise CannotServe(
            "device",
            f"ResourceClaim {ref}: device {device.device} is a partition, but this node makes no vNPUs on "
            "demand (vnpu=dynamic is not set, or the driver cannot): it is not prepared",
        )
    if entry.template is None and state.split:
        raise CannotServe(
            "device",
            f"ResourceClaim {ref}: device {device.device} is split into vNPUs; a chip that carries vNPUs is "
            "never given whole, nor shared",
        )
    healthy, reason = chip_health([state])
    if not healthy:
        raise CannotServe(
            "device",
            f"ResourceClaim {ref}: device {device.device} is unhealthy ({reason}); the kubelet retries, and "
            "the claim is prepared once the chip is healthy again",
        )
    return state


def check_whole_or_split(
    catalog: DeviceCatalog, ref: ClaimRef, device: AllocatedDevice, others: Iterable[PreparedClaim]
) -> None:
    """CannotServe when a chip would be given whole beside a partition of it, or split while held whole
    (the scheduler's counters keep these apart; this holds before a poll sees a vNPU just made)."""
    entry = catalog.find(device.device)
    if entry is None:
        return
    for other in others:
        for held in other.devices:
            found = catalog.find(held.device)
            if (
                found is None
                or found.phy_id != entry.phy_id
                or (found.template is None) == (entry.template is None)
            ):
                continue
            whole = entry.template is None
            raise CannotServe(
                "device",
                f"ResourceClaim {ref}: device {device.device} "
                + ("is the whole chip" if whole else "is a partition of a chip")
                + f" of which ResourceClaim {other.ref} (UID {other.ref.uid}) holds {held.device}; a chip is "
                "given whole or split, never both",
            )


def check_not_held(ref: ClaimRef, device: AllocatedDevice, others: Iterable[PreparedClaim]) -> None:
    """CannotServe when another claim holds ``device`` in a way that excludes this one."""
    if device.admin_access:
        return
    for other in others:
        for held in other.devices:
            if held.device != device.device or held.admin_access:
                continue
            if device.share_id is not None and held.share_id is not None and held.share_id != device.share_id:
                continue  # two shares of a device several claims are allocated
            raise CannotServe(
                "device",
                f"ResourceClaim {ref}: device {device.device}"
                + (f" (share {device.share_id})" if device.share_id else "")
                + f" is prepared for ResourceClaim {other.ref} (UID {other.ref.uid}); a device serves one "
                "claim at a time unless the results have adminAccess or it is shared",
            )
