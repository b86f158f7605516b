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

A partition of a chip in dynamic mode gets its vNPU here
(:mod:`~ascend_plugin.faces.dra.vnpu_keeper`): the claim is written down as
``preparing`` with the vNPU's chip and template, the vNPU is made with the
partition's template on the chip the allocation names, the CDI spec hands
over ``/dev/vdavinci<id>`` as ``/dev/davinci<id>``, and the claim is written
down as ``prepared`` with the id before the answer. Unpreparing destroys it
before the record goes. At start, a claim found ``preparing`` (never answered)
is dropped, and every vNPU of a chip in dynamic mode that no prepared claim
owns is destroyed; a claim prepared again after a restart is answered with the
vNPU it had. The part that makes or destroys vNPUs and writes the checkpoint
is shielded from the kubelet giving up, so driver and file never part.

Every claim gets an answer of its own; one claim's failure never fails the
call. The API server gets a budget per call, so a slow one turns into
per-claim errors before the kubelet's deadline, not into a timed-out call.

A claim that cannot be prepared is a refusal
(:mod:`ascend_plugin.grpc_guard.refusals`) whose reason is the claim's error
for the kubelet and whose label counts it: ``claim`` (the claim itself),
``api`` (the API server could not be asked: ``Unavailable``), ``device`` (a
device of the claim), ``vnpu`` (its vNPU could not be made), ``io`` (a file
could not be written).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.to_thread

from ascend_plugin.faces.dra.checkpoint import (
    PREPARED,
    PREPARING,
    Checkpoint,
    OwnedVnpu,
    PreparedClaim,
    PreparedDevice,
)
from ascend_plugin.faces.dra.claim_specs import ClaimSpecs
from ascend_plugin.faces.dra.claims import AllocatedDevice, ClaimRef, allocated_devices
from ascend_plugin.faces.dra.device_checks import check_not_held, check_whole_or_split, checked_chip
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.names import phy_of
from ascend_plugin.faces.dra.vnpu_keeper import UnmakeFailed, VnpuKeeper
from ascend_plugin.faces.dra.vnpus import VnpuError
from ascend_plugin.grpc_guard.refusals import CannotServe, Refused, Unavailable
from ascend_plugin.offers.base import DeviceNode
from ascend_plugin.offers.vnpus import vnpu_node
from ascend_plugin.offers.whole_chips import chip_node

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
    dropped: int = 0  # claims found preparing at start (never answered), dropped
    errors: collections.Counter[str] = field(default_factory=collections.Counter)


class ClaimPreparer:
    """Prepares and unprepares the claims of this node's pool, serialised, with a checkpoint."""

    def __init__(
        self,
        *,
        driver: str,
        pool: str,
        catalog: DeviceCatalog,
        specs: ClaimSpecs,
        checkpoint: Checkpoint,
        source: ClaimSource,
        keeper: VnpuKeeper | None = None,
        api_budget: float = API_BUDGET,
    ) -> None:
        """``keeper``: makes the partitions' vNPUs (vnpu=dynamic); None where no chip is split on demand."""
        self.driver = driver
        self.pool = pool
        self.catalog = catalog
        self.inventory = catalog.inventory
        self.keeper = keeper
        self.specs = specs
        self.checkpoint = checkpoint
        self.source = source
        self.api_budget = api_budget
        self.claims: dict[str, PreparedClaim] = {}
        self.stats = PrepareStats()
        self._lock = anyio.Lock()

    # -- start ----------------------------------------------------------------------------

    async def restore(self) -> None:
        """Load the checkpoint; drop what was never answered; put back missing specs, remove stray ones.

        Then every chip in dynamic mode is swept of the vNPUs no prepared claim
        owns, and a prepared claim whose vNPU is gone is said (its id forgotten,
        so that unpreparing it never destroys a vNPU made since under that id).
        A spec or vNPU that cannot be written, removed or read is logged, not
        fatal: the kubelet must still be able to unprepare.
        """
        async with self._lock:
            loaded = await anyio.to_thread.run_sync(self.checkpoint.load)
            self.claims = {uid: claim for uid, claim in loaded.items() if claim.state == PREPARED}
            for uid, claim in loaded.items():
                if claim.state == PREPARING:
                    self.stats.dropped += 1
                    log.warning(
                        "ResourceClaim %s was being prepared when the plugin stopped and was never answered: "
                        "%s; the kubelet prepares it again",
                        claim.ref,
                        self._fate_of_dropped(claim),
                        extra={"uid": uid, "vnpus": [vnpu.vdev_id for vnpu in claim.vnpus]},
                    )
            with anyio.CancelScope(shield=True):
                changed = await self._sweep_all() or len(self.claims) != len(loaded)
                if changed:
                    await self._save_logged(self.claims)
            self._warn_unkept()
            await self._restore_specs()
        if self.claims:
            log.info("%d prepared claim(s) in the checkpoint", len(self.claims))

    def _fate_of_dropped(self, claim: PreparedClaim) -> str:
        """What becomes of the vNPUs of a claim dropped at start, and what an operator does about them."""
        if not claim.vnpus:
            return "it held no vNPU"
        if self.keeper is not None:
            return "the vNPUs made for it are destroyed with every vNPU no prepared claim owns"
        left = [
            f"vNPU {vnpu.vdev_id} on chip {vnpu.phy_id} ({self._destroy_command(vnpu)})"
            if vnpu.vdev_id is not None
            else f"a vNPU of template {vnpu.template} on chip {vnpu.phy_id}, if it was made (npu-smi info -t "
            f"info-vnpu -i {self._card_and_chip(vnpu.phy_id)} lists them; {self._destroy_command(vnpu)} "
            "destroys one no pod uses)"
            for vnpu in claim.vnpus
        ]
        return (
            "vnpu=dynamic is off now, so nothing destroys what was made for it; destroy by hand "
            + "; ".join(left)
        )

    def _card_and_chip(self, phy_id: int) -> str:
        """The chip as npu-smi takes it after ``-i``: ``<card> -c <device>`` (placeholders if it is gone)."""
        state = self.inventory.get(phy_id)
        return "<card> -c <chip>" if state is None else f"{state.chip.card_id} -c {state.chip.device_id}"

    def _destroy_command(self, vnpu: OwnedVnpu) -> str:
        """The npu-smi command that destroys ``vnpu`` by hand."""
        vdev = "<id>" if vnpu.vdev_id is None else vnpu.vdev_id
        return f"npu-smi set -t destroy-vnpu -i {self._card_and_chip(vnpu.phy_id)} -v {vdev}"

    def _warn_unkept(self) -> None:
        """Say which prepared claims hold vNPUs that no run without vnpu=dynamic destroys."""
        if self.keeper is not None:
            return
        for uid, claim in self.claims.items():
            made = [vnpu for vnpu in claim.vnpus if vnpu.vdev_id is not None]
            if made:
                log.warning(
                    "ResourceClaim %s holds vNPU(s) %s made on demand, but vnpu=dynamic is off now: they are "
                    "not destroyed when it is unprepared: destroy them by hand then",
                    claim.ref,
                    ", ".join(
                        f"{vnpu.vdev_id} on chip {vnpu.phy_id} ({self._destroy_command(vnpu)})"
                        for vnpu in made
                    ),
                    extra={"uid": uid, "vnpus": [vnpu.vdev_id for vnpu in made]},
                )

    async def _restore_specs(self) -> None:
        for uid, claim in self.claims.items():
            if self.specs.path(uid).exists():
                continue
            try:
                await anyio.to_thread.run_sync(self.specs.write, uid, _nodes(claim.devices))
            except OSError as error:
                log.error("cannot write the CDI spec of prepared claim %s: %s", claim.ref, error)
            else:
                log.info("wrote the missing CDI spec of prepared claim %s", claim.ref, extra={"uid": uid})
        for uid in self.specs.present() - self.claims.keys():
            try:
                await anyio.to_thread.run_sync(self.specs.remove, uid)
            except OSError as error:
                log.error("cannot remove the CDI spec of claim UID %s, which is not prepared: %s", uid, error)
            else:
                log.info("removed the CDI spec of claim UID %s, which is not prepared", uid)

    def _owned(self, phy_id: int, *extra: PreparedClaim) -> set[int]:
        """The vNPU ids of a chip that prepared claims (and ``extra`` ones) own."""
        return {
            vnpu.vdev_id
            for claim in (*self.claims.values(), *extra)
            for vnpu in claim.vnpus
            if vnpu.phy_id == phy_id and vnpu.vdev_id is not None
        }

    async def _sweep_all(self) -> bool:
        """Sweep every chip in dynamic mode; True when a prepared claim's vNPU turned out gone."""
        if self.keeper is None:
            return False
        changed = False
        for phy in sorted(self.keeper.chips):
            try:
                present = await self.keeper.sweep(phy, self._owned(phy))
            except VnpuError as error:
                log.error(
                    "cannot sweep the vNPUs of chip %d: %s; it is swept before its next vNPU", phy, error
                )
                continue
            changed |= self._forget_gone(phy, {vnpu.vdev_id for vnpu in present})
        return changed

    def _forget_gone(self, phy_id: int, present: set[int]) -> bool:
        """Forget the ids of prepared claims' vNPUs on the chip that are not ``present``; True if any."""
        changed = False
        for uid, claim in list(self.claims.items()):
            gone = [v for v in claim.vnpus if v.phy_id == phy_id and v.vdev_id not in (None, *present)]
            for vnpu in gone:
                log.error(
                    "vNPU %s of prepared ResourceClaim %s on chip %d is gone (destroyed outside the plugin, "
                    "or the plugin stopped while unpreparing the claim); its pods have lost it",
                    vnpu.vdev_id,
                    claim.ref,
                    phy_id,
                    extra={"uid": uid, "chip": phy_id, "vnpu": vnpu.vdev_id},
                )
            if gone:
                self.claims[uid] = _forgetting(claim, {(vnpu.phy_id, vnpu.vdev_id) for vnpu in gone})
                changed = True
        return changed

    async def _save_logged(self, claims: Mapping[str, PreparedClaim]) -> bool:
        try:
            await anyio.to_thread.run_sync(self.checkpoint.save, claims)
        except OSError as error:
            log.error("cannot write the checkpoint %s: %s", self.checkpoint.path, error.strerror or error)
            return False
        return True

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
        self.specs.path(ref.uid)  # a UID that cannot name a spec file is refused before anything is made
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
        devices = [self._checked(ref, device, pending) for device in allocated]
        prepared = PreparedClaim(ref, self.pool, tuple(devices), PREPARING)
        with anyio.CancelScope(shield=True):  # vNPUs, spec and checkpoint: never left apart by a cancel
            if prepared.vnpus:
                prepared = await self._make_vnpus(prepared, pending)
            try:
                ids = await anyio.to_thread.run_sync(self.specs.write, ref.uid, _nodes(prepared.devices))
            except OSError as error:
                await self._undo(prepared)
                raise CannotServe(
                    "io",
                    f"cannot write the CDI spec {self.specs.path(ref.uid)}: {error.strerror or error}; mount "
                    "the runtime's CDI directory writable (cdi_spec_dir)",
                ) from None
        devices = [dataclasses.replace(device, cdi_ids=(ids[device.device],)) for device in prepared.devices]
        return dataclasses.replace(prepared, devices=tuple(devices), state=PREPARED)

    def _checked(
        self, ref: ClaimRef, device: AllocatedDevice, pending: Mapping[str, PreparedClaim]
    ) -> PreparedDevice:
        """The device as it will be prepared (a partition: with its vNPU to make); else CannotServe."""
        state = checked_chip(self.catalog, self.pool, ref, device, dynamic=self.keeper is not None)
        others = (*self.claims.values(), *pending.values())
        check_not_held(ref, device, others)
        check_whole_or_split(self.catalog, ref, device, others)
        entry = self.catalog.find(device.device)
        template = entry.template if entry is not None else None
        vnpu = OwnedVnpu(state.phy_id, template.name) if template is not None else None
        return PreparedDevice(device.device, device.requests, (), device.admin_access, device.share_id, vnpu)

    async def _make_vnpus(self, claim: PreparedClaim, pending: Mapping[str, PreparedClaim]) -> PreparedClaim:
        """Write the claim down as preparing, then make its vNPUs; the claim with their ids."""
        assert self.keeper is not None  # a partition passed checked_chip only with a keeper
        unanswered = {uid: dataclasses.replace(other, state=PREPARING) for uid, other in pending.items()}
        if not await self._save_logged({**self.claims, **unanswered, claim.ref.uid: claim}):
            raise CannotServe(
                "io",
                f"cannot write the checkpoint {self.checkpoint.path} before making the vNPUs of "
                f"ResourceClaim {claim.ref}: the plugin directory must be writable",
            )
        owned = {vdev for vnpu in claim.vnpus for vdev in self._owned(vnpu.phy_id, *pending.values())}
        try:
            made = iter(await self.keeper.make(claim.vnpus, owned))
        except VnpuError as error:
            await self._save_logged(self.claims)
            raise CannotServe("vnpu", f"ResourceClaim {claim.ref}: {error}") from None
        devices = [
            dataclasses.replace(device, vnpu=next(made)) if device.vnpu is not None else device
            for device in claim.devices
        ]
        return dataclasses.replace(claim, devices=tuple(devices))

    async def _undo(self, claim: PreparedClaim) -> None:
        """Take back a claim that will not be answered prepared: its vNPUs, its preparing record."""
        if not claim.vnpus or self.keeper is None:
            return
        try:
            await self.keeper.unmake(claim.vnpus)
        except UnmakeFailed as failed:
            log.error("cannot take back the vNPUs of ResourceClaim %s: %s", claim.ref, failed)
            self.keeper.unswept.update(vnpu.phy_id for vnpu in failed.left)
        await self._save_logged(self.claims)

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
                for uid, claim in new.items():
                    await anyio.to_thread.run_sync(self.specs.remove, uid)
                    await self._undo(claim)
                self.stats.errors["io"] += len(new)
                return {uid: Outcome(None, message) for uid in new}
            self.claims = claims
        self.stats.prepared += len(new)
        for claim in new.values():
            log.info(
                "prepared ResourceClaim %s: %s",
                claim.ref,
                ", ".join(_described(device) for device in claim.devices) or "no device of ours",
                extra={
                    "uid": claim.ref.uid,
                    "devices": [device.device for device in claim.devices],
                    "vnpus": [vnpu.vdev_id for vnpu in claim.vnpus],
                },
            )
        return {uid: Outcome(claim) for uid, claim in new.items()}

    # -- unprepare --------------------------------------------------------------------------

    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """An error per claim UID ("" when done): vNPUs destroyed, specs removed, the checkpoint rewritten."""
        async with self._lock:
            errors: dict[str, str] = {}
            removed: list[str] = []
            with anyio.CancelScope(shield=True):
                for ref in refs:
                    error = await self._unprepare_one(ref)
                    errors[ref.uid] = error
                    if not error and ref.uid in self.claims:
                        removed.append(ref.uid)
                if removed:
                    names = [str(self.claims[uid].ref) for uid in removed]
                    remaining = {uid: claim for uid, claim in self.claims.items() if uid not in removed}
                    try:
                        await anyio.to_thread.run_sync(self.checkpoint.save, remaining)
                    except OSError as error:
                        # The claims stay, their vNPUs' ids forgotten: the next write records that too.
                        message = (
                            f"cannot write the checkpoint {self.checkpoint.path}: {error.strerror or error}; "
                            "the kubelet retries"
                        )
                        log.error("cannot unprepare ResourceClaim(s) %s: %s", ", ".join(names), message)
                        self.stats.errors["io"] += len(removed)
                        return errors | dict.fromkeys(removed, message)
                    self.claims = remaining
                    self.stats.unprepared += len(removed)
                    log.info("unprepared ResourceClaim(s) %s", ", ".join(names), extra={"uids": removed})
            return errors

    async def _unprepare_one(self, ref: ClaimRef) -> str:
        """Destroy the claim's vNPUs, then remove its spec; the error ("" when done)."""
        claim = self.claims.get(ref.uid)
        if claim is not None and claim.vnpus and self.keeper is not None:
            try:
                await self.keeper.unmake(claim.vnpus)
            except UnmakeFailed as failed:
                left = {(vnpu.phy_id, vnpu.vdev_id) for vnpu in failed.left}
                self._keep_only(ref.uid, left)
                self.stats.errors["vnpu"] += 1
                log.warning("cannot unprepare ResourceClaim %s yet: %s", ref, failed, extra={"uid": ref.uid})
                return f"ResourceClaim {ref}: {failed}; the kubelet retries"
            # Gone from the driver, which may hand their ids to another claim from now on: whatever fails
            # next (the spec, the checkpoint), a retry must not destroy a vNPU under one of those ids.
            self._keep_only(ref.uid, set())
        try:
            await anyio.to_thread.run_sync(self.specs.remove, ref.uid)
        except OSError as error:
            self.stats.errors["io"] += 1
            return f"cannot remove the CDI spec {self.specs.path(ref.uid)}: {error}"
        return ""

    def _keep_only(self, uid: str, left: set[tuple[int, int | None]]) -> None:
        """Forget the ids of the claim's vNPUs destroyed already (a retry destroys only the rest)."""
        claim = self.claims[uid]
        destroyed = {(vnpu.phy_id, vnpu.vdev_id) for vnpu in claim.vnpus} - left
        self.claims[uid] = _forgetting(claim, destroyed)


def _forgetting(claim: PreparedClaim, gone: set[tuple[int, int | None]]) -> PreparedClaim:
    """``claim`` without the ids of its vNPUs in ``gone`` (chip, id): none is destroyed by mistake later."""
    devices = tuple(
        dataclasses.replace(device, vnpu=dataclasses.replace(device.vnpu, vdev_id=None))
        if device.vnpu is not None and (device.vnpu.phy_id, device.vnpu.vdev_id) in gone
        else device
        for device in claim.devices
    )
    return dataclasses.replace(claim, devices=devices)


def _nodes(devices: Sequence[PreparedDevice]) -> dict[str, DeviceNode]:
    """The device node each device hands over: its vNPU's, or its chip's."""
    nodes: dict[str, DeviceNode] = {}
    for device in devices:
        if device.vnpu is not None:
            if device.vnpu.vdev_id is not None:
                nodes[device.device] = vnpu_node(device.vnpu.vdev_id)
        elif (phy := phy_of(device.device)) is not None:
            nodes[device.device] = chip_node(phy)
    return nodes


def _described(device: PreparedDevice) -> str:
    if device.vnpu is not None:
        return f"{device.device} (vNPU {device.vnpu.vdev_id}, {device.vnpu.template})"
    return device.device + (f" (share {device.share_id})" if device.share_id else "")
