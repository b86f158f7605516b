"""NodePrepareResources and NodeUnprepareResources: one at a time, idempotent, written down first.

The kubelet may call both concurrently and repeats a call whenever it did not
get an answer (its deadline is 45 s). So every call takes one lock, and:

* a claim already prepared is answered from the checkpoint, without the API
  server (it may be away; the claim may be gone);
* a new claim is read from the API server (UID, allocation, this driver's
  results in this node's pool), its devices are checked (on this node,
  healthy, not prepared for another claim unless the results have
  ``adminAccess``), its CDI spec is written, and the checkpoint records it
  before the answer goes out;
* unpreparing removes the claim's spec and its record, needs no API server,
  and succeeds for a claim it does not know.

Every claim gets an answer of its own; one claim's failure never fails the
call. The API server gets a budget per call, so a slow one turns into
per-claim errors before the kubelet's deadline, not into a timed-out call.

A claim that cannot be prepared is a refusal
(:mod:`ascend_plugin.grpc_guard.refusals`) whose reason is the claim's error
for the kubelet and whose label counts it: ``claim`` (the claim itself),
``api`` (the API server could not be asked: ``Unavailable``), ``device`` (a
device of the claim), ``io`` (a file could not be written).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.to_thread

from ascend_plugin.faces.dra.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from ascend_plugin.faces.dra.claim_specs import ClaimSpecs
from ascend_plugin.faces.dra.claims import AllocatedDevice, ClaimRef, allocated_devices
from ascend_plugin.faces.dra.names import device_name, phy_of
from ascend_plugin.grpc_guard.refusals import CannotServe, Refused, Unavailable
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.offers.base import chip_health

log = logging.getLogger(__name__)

# Seconds one call may spend waiting for the API server, well inside the kubelet's 45 s.
API_BUDGET = 30.0


class ClaimSource(Protocol):
    """Where claims are read: the API server. Raises Unavailable when it is away, CannotServe (``claim``)."""

    async def claim(self, ref: ClaimRef) -> Mapping[str, object]:
        """The ResourceClaim as JSON."""
        ...


@dataclass(frozen=True)
class Outcome:
    """The answer for one claim: its prepared devices, or why not."""

    claim: PreparedClaim | None
    error: str = ""


@dataclass
class PrepareStats:
    """What the preparer has done, for the metrics."""

    prepared: int = 0  # claims prepared (first time)
    repeated: int = 0  # claims answered from the checkpoint
    unprepared: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)


class ClaimPreparer:
    """Prepares and unprepares the claims of this node's pool, serialised, with a checkpoint."""

    def __init__(
        self,
        *,
        driver: str,
        pool: str,
        inventory: Inventory,
        specs: ClaimSpecs,
        checkpoint: Checkpoint,
        source: ClaimSource,
        api_budget: float = API_BUDGET,
    ) -> None:
        self.driver = driver
        self.pool = pool
        self.inventory = inventory
        self.specs = specs
        self.checkpoint = checkpoint
        self.source = source
        self.api_budget = api_budget
        self.claims: dict[str, PreparedClaim] = {}
        self.stats = PrepareStats()
        self._lock = anyio.Lock()

    # -- start ----------------------------------------------------------------------------

    async def restore(self) -> None:
        """Load the checkpoint; put back a prepared claim's missing spec, remove specs of no claim.

        A spec that cannot be written or removed is logged, not fatal: the
        kubelet must still be able to unprepare.
        """
        async with self._lock:
            self.claims = await anyio.to_thread.run_sync(self.checkpoint.load)
            for uid, claim in self.claims.items():
                if self.specs.path(uid).exists():
                    continue
                phys = [phy for device in claim.devices if (phy := phy_of(device.device)) is not None]
                try:
                    await anyio.to_thread.run_sync(self.specs.write, uid, phys)
                except OSError as error:
                    log.error("cannot write the CDI spec of prepared claim %s: %s", claim.ref, error)
                else:
                    log.info("wrote the missing CDI spec of prepared claim %s", claim.ref, extra={"uid": uid})
            for uid in self.specs.present() - self.claims.keys():
                try:
                    await anyio.to_thread.run_sync(self.specs.remove, uid)
                except OSError as error:
                    log.error(
                        "cannot remove the CDI spec of claim UID %s, which is not prepared: %s", uid, error
                    )
                else:
                    log.info("removed the CDI spec of claim UID %s, which is not prepared", uid)
        if self.claims:
            log.info("%d prepared claim(s) in the checkpoint", len(self.claims))

    # -- prepare --------------------------------------------------------------------------

    async def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, Outcome]:
        """An outcome per claim UID; the new ones are checkpointed before this returns."""
        async with self._lock:
            deadline = anyio.current_time() + self.api_budget
            outcomes: dict[str, Outcome] = {}
            new: dict[str, PreparedClaim] = {}
            for ref in refs:
                if ref.uid in outcomes:
                    continue
                known = self.claims.get(ref.uid)
                if known is not None:
                    self.stats.repeated += 1
                    outcomes[ref.uid] = Outcome(known)
                    continue
                try:
                    claim = await self._prepare_one(ref, new, deadline)
                except Refused as refused:
                    self.stats.errors[refused.label] += 1
                    log.warning(
                        "cannot prepare ResourceClaim %s: %s",
                        ref,
                        refused,
                        extra={"uid": ref.uid, **refused.fields()},
                    )
                    outcomes[ref.uid] = Outcome(None, refused.reason)
                    continue
                new[ref.uid] = claim
                outcomes[ref.uid] = Outcome(claim)
            if new:
                outcomes.update(await self._record(new))
            return outcomes

    async def _prepare_one(
        self, ref: ClaimRef, pending: Mapping[str, PreparedClaim], deadline: float
    ) -> PreparedClaim:
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            raise Unavailable(
                "api",
                f"ResourceClaim {ref} was not read: the API server took this call's whole budget "
                f"({self.api_budget:g} s) on the claims before it; the kubelet retries",
            )
        with anyio.move_on_after(remaining) as scope:
            claim = await self.source.claim(ref)
        if scope.cancelled_caught:
            raise Unavailable(
                "api",
                f"ResourceClaim {ref}: the API server did not answer within {remaining:.0f} s; "
                "the kubelet retries",
            )
        allocated = allocated_devices(claim, ref, self.driver, self.pool)
        for device in allocated:
            self._check_device(ref, device, pending)
        phys = [phy for device in allocated if (phy := phy_of(device.device)) is not None]
        try:
            ids = await anyio.to_thread.run_sync(self.specs.write, ref.uid, phys)
        except OSError as error:
            raise CannotServe(
                "io",
                f"cannot write the CDI spec {self.specs.path(ref.uid)}: {error.strerror or error}; mount the "
                "runtime's CDI directory writable (cdi_spec_dir)",
            ) from None
        devices = tuple(
            PreparedDevice(device.device, device.requests, (ids[phy],), device.admin_access)
            for device in allocated
            if (phy := phy_of(device.device)) is not None
        )
        return PreparedClaim(ref, self.pool, devices)

    def _check_device(
        self, ref: ClaimRef, device: AllocatedDevice, pending: Mapping[str, PreparedClaim]
    ) -> None:
        phy = phy_of(device.device)
        state = self.inventory.get(phy) if phy is not None else None
        if state is None:
            known = ", ".join(device_name(s.phy_id) for s in self.inventory.chips()) or "none"
            raise CannotServe(
                "device",
                f"ResourceClaim {ref}: device {device.device} is not a device of pool {self.pool} "
                f"(it has {known})",
            )
        if state.split:
            raise CannotServe(
                "device",
                f"ResourceClaim {ref}: device {device.device} is split into vNPUs; a chip that carries "
                "vNPUs is never given whole",
            )
        healthy, reason = chip_health([state])
        if not healthy:
            raise CannotServe(
                "device",
                f"ResourceClaim {ref}: device {device.device} is unhealthy ({reason}); "
                "the kubelet retries, and the claim is prepared once the chip is healthy again",
            )
        if device.admin_access:
            return
        for other in (*self.claims.values(), *pending.values()):
            if any(held.device == device.device and not held.admin_access for held in other.devices):
                raise CannotServe(
                    "device",
                    f"ResourceClaim {ref}: device {device.device} is prepared for ResourceClaim {other.ref} "
                    f"(UID {other.ref.uid}); a device serves one claim at a time unless the results have "
                    "adminAccess",
                )

    async def _record(self, new: Mapping[str, PreparedClaim]) -> dict[str, Outcome]:
        """Checkpoint the new claims; if that fails, refuse them (and take their specs back)."""
        claims = {**self.claims, **new}
        with anyio.CancelScope(shield=True):  # a kubelet giving up must not leave file and memory apart
            try:
                await anyio.to_thread.run_sync(self.checkpoint.save, claims)
            except OSError as error:
                message = (
                    f"cannot write the checkpoint {self.checkpoint.path}: {error.strerror or error}; the "
                    "plugin directory must be writable"
                )
                log.error("%s", message)
                for uid in new:
                    await anyio.to_thread.run_sync(self.specs.remove, uid)
                self.stats.errors["io"] += len(new)
                return {uid: Outcome(None, message) for uid in new}
            self.claims = claims
        self.stats.prepared += len(new)
        for claim in new.values():
            log.info(
                "prepared ResourceClaim %s: %s",
                claim.ref,
                ", ".join(device.device for device in claim.devices) or "no device of ours",
                extra={"uid": claim.ref.uid, "devices": [device.device for device in claim.devices]},
            )
        return {uid: Outcome(claim) for uid, claim in new.items()}

    # -- unprepare --------------------------------------------------------------------------

    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """An error per claim UID ("" when done): specs removed, the checkpoint rewritten without them."""
        async with self._lock:
            errors: dict[str, str] = {}
            removed: list[str] = []
            for ref in refs:
                try:
                    await anyio.to_thread.run_sync(self.specs.remove, ref.uid)
                except OSError as error:
                    errors[ref.uid] = f"cannot remove the CDI spec {self.specs.path(ref.uid)}: {error}"
                    self.stats.errors["io"] += 1
                    continue
                errors[ref.uid] = ""
                if ref.uid in self.claims:
                    removed.append(ref.uid)
            if removed:
                names = [str(self.claims[uid].ref) for uid in removed]
                remaining = {uid: claim for uid, claim in self.claims.items() if uid not in removed}
                with anyio.CancelScope(shield=True):
                    try:
                        await anyio.to_thread.run_sync(self.checkpoint.save, remaining)
                    except OSError as error:
                        message = (
                            f"cannot write the checkpoint {self.checkpoint.path}: {error.strerror or error}"
                        )
                        self.stats.errors["io"] += len(removed)
                        return errors | dict.fromkeys(removed, message)
                    self.claims = remaining
                self.stats.unprepared += len(removed)
                log.info("unprepared ResourceClaim(s) %s", ", ".join(names), extra={"uids": removed})
            return errors
