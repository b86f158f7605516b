"""Whether an allocated device can be prepared for a claim here, now: one check per rule, a refusal in words.

A device of the allocation must be one this driver publishes in this pool, on
a healthy chip; a chip split into vNPUs is never given whole (nor shared); and
no device serves two claims at once unless the results have ``adminAccess``
or it is a device several claims share, each its own share (``shareID``). A
partition's chip must be in dynamic mode (its vNPU is made here). Each refusal
is a :class:`~ascend_plugin.grpc_guard.refusals.CannotServe` (label ``device``) whose reason reaches
the pod's events through the kubelet.
"""

from __future__ import annotations

from collections.abc import Iterable

from ascend_plugin.faces.dra.checkpoint import PreparedClaim
from ascend_plugin.faces.dra.claims import AllocatedDevice, ClaimRef
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.names import device_name
from ascend_plugin.grpc_guard.refusals import CannotServe
from ascend_plugin.inventory.inventory import ChipState
from ascend_plugin.offers.base import chip_health


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
    """CannotServe when a chip would be given whole beside a partition of it, or split while held whole.

    The scheduler's counters keep these apart; this holds even where the last
    health poll has not seen a vNPU just made.
    """
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
