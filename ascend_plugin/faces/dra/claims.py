"""A ResourceClaim, read for what this node's driver must prepare.

The kubelet names a claim by namespace, name and UID only; the allocation is in
the claim's ``status.allocation``, written by the scheduler. This module checks
what the API server returned and picks this driver's part: the results whose
``driver`` is ours and whose ``pool`` is this node's. Each problem is a
:class:`~ascend_plugin.grpc_guard.refusals.CannotServe` (label ``claim``) whose
reason says what is wrong and what happens next, because it ends up in the
pod's events through the kubelet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ascend_plugin.faces.dra.names import request_base
from ascend_plugin.grpc_guard.refusals import CannotServe
from ascend_plugin.kubeapi.client import mapping_field, string_field


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the kubelet names it."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of_uid(cls, uid: str) -> ClaimRef:
        """A claim known by its UID alone (rebuilt from its CDI spec): named so until the kubelet asks."""
        return cls("", f"with UID {uid}", uid)


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
    """This driver's devices of ``claim`` in ``pool``, in the allocation's order, one entry per device share.

    Results of other drivers are someone else's to prepare. A result of ours in
    another node's pool means the claim was allocated elsewhere: refused, since
    its devices cannot be given to a container here. Each share of a device
    several claims hold (its ``shareID``) is an entry of its own.
    """
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
