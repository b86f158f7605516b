"""NodePrepareResources and NodeUnprepareResources: one at a time, idempotent, written down first.

The kubelet may call both at once and repeats an unanswered call, so every call takes one lock; making or
destroying vNPUs and writing the checkpoint are shielded from the kubelet giving up. docs/dra.md: "Claims",
"A lost checkpoint", "Prepare and Unprepare", "Crashes and restarts".
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from ascend_plugin.faces.dra.checkpoint import (
    PREPARED,
    PREPARING,
    Checkpoint,
    ClaimRef,
    OwnedVnpu,
    PreparedClaim,
    PreparedDevice,
)
from ascend_plugin.faces.dra.claim_specs import ClaimSpecs
from ascend_plugin.faces.dra.claims import (
    AllocatedDevice,
    allocated_devices,
    check_not_held,
    check_whole_or_split,
    checked_chip,
)
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.names import chip_of, phy_of
from ascend_plugin.faces.dra.vnpus import UnmakeFailed, VnpuError, VnpuKeeper
from ascend_plugin.grpc_guard.refusals import CannotServe, Refused, Unavailable
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import RESOURCE_CLAIMS, Kube
from ascend_plugin.kubeapi.errors import KubeError, NotFound
from ascend_plugin.offers.base import DeviceNode
from ascend_plugin.offers.node_offers import chip_node, node_of, vnpu_node
from backends.library import VdevInfo

log = logging.getLogger(__name__)

# Seconds one call may spend waiting for the API server, well inside the kubelet's 45 s.
API_BUDGET = 30.0
_VNPU_NODE = re.compile(r"/dev/vdavinci(\d+)")  # what a partition's CDI device hands over (vnpu_node)


@dataclass(frozen=True)
class Outcome:
    """The answer for one claim: its prepared devices, or why not."""

    claim: PreparedClaim | None
    error: str = ""


@dataclass
class PrepareStats:
    prepared: int = 0  # claims prepared (first time)
    unprepared: int = 0
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
        keeper: VnpuKeeper | None = None,
        held: HeldChips | None = None,
    ) -> None:
        """``keeper``: makes the partitions' vNPUs (None: no chip split on demand); ``held``: told of the
        chips each prepared claim takes, before the kubelet lists them."""
        self.held = held
        self.driver = driver
        self.pool = pool
        self.catalog = catalog
        self.inventory = catalog.inventory
        self.keeper = keeper
        self.specs = specs
        self.checkpoint = checkpoint
        self.kube: Kube | None = None  # the API client, once the face has one
        self.claims: dict[str, PreparedClaim] = {}
        self.stats = PrepareStats()
        self._unread_specs: set[str] = set()  # specs a lost checkpoint's rebuild could not read: left alone
        self._lock = anyio.Lock()

    # -- start ----------------------------------------------------------------------------

    async def restore(self) -> None:
        """Load the checkpoint (a lost one rebuilt from the CDI specs), drop what was never answered, sweep,
        and put the specs right; a failure is logged, not fatal: the kubelet must still be able to
        unprepare."""
        async with self._lock:
            loaded = await anyio.to_thread.run_sync(self.checkpoint.load)
            if self.checkpoint.lost:
                loaded = await self._recover()
            self.claims = {uid: claim for uid, claim in loaded.items() if claim.state == PREPARED}
            for uid, claim in loaded.items():
                if claim.state == PREPARING:
                    log.warning(
                        "ResourceClaim %s was being prepared when the plugin stopped and was never answered: "
                        "%s; the kubelet prepares it again",
                        claim.ref,
                        self._fate_of_dropped(claim),
                        extra={"uid": uid, "vnpus": [vnpu.vdev_id for vnpu in claim.vnpus]},
                    )
            with anyio.CancelScope(shield=True):
                changed = await self._sweep_all() or len(self.claims) != len(loaded)
                if changed or self.checkpoint.lost:
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

    async def _recover(self) -> dict[str, PreparedClaim]:
        """The prepared claims as their CDI specs tell them, after the checkpoint was lost. A spec that cannot
        be read holds every sweep of the run: a vNPU might be its claim's."""
        try:
            uids = await anyio.to_thread.run_sync(self.specs.listed)
        except OSError as error:
            self._hold_sweeps(f"the CDI directory {self.specs.spec_dir} cannot be listed ({error})")
            return {}
        claims: dict[str, PreparedClaim] = {}
        for uid in sorted(uids):
            try:
                claims[uid] = self._from_spec(uid, await anyio.to_thread.run_sync(self.specs.nodes, uid))
            except (OSError, ValueError) as error:
                self._unread_specs.add(uid)
                log.error(
                    "the CDI spec %s cannot be read back (%s): it is left where it is",
                    self.specs.path(uid),
                    error,
                    extra={"uid": uid},
                )
        if self._unread_specs:
            self._hold_sweeps(f"{len(self._unread_specs)} CDI spec(s) of claims cannot be read back")
        log.warning(
            "rebuilt %d prepared claim(s) from their CDI specs, with vNPU(s) %s: they are kept, unprepared "
            "as usual, and read again from the API server when the kubelet prepares them again",
            len(claims),
            ", ".join(f"{v.vdev_id} on chip {v.phy_id}" for c in claims.values() for v in c.vnpus) or "none",
            extra={"uids": sorted(claims)},
        )
        return claims

    def _from_spec(self, uid: str, nodes: Mapping[str, str]) -> PreparedClaim:
        """A claim as its spec tells it: devices, the vNPU each partition hands over; ValueError: not ours."""
        devices = []
        for device, host_path in nodes.items():
            made = _VNPU_NODE.fullmatch(host_path)
            vnpu = None
            if made is not None:
                entry, phy = self.catalog.find(device), chip_of(device)
                if entry is None or entry.template is None or phy is None:
                    raise ValueError(
                        f"device {device} hands over {host_path}, but is no partition of this node"
                    )
                vnpu = OwnedVnpu(phy, entry.template.name, int(made[1]))
            elif phy_of(device) is None:
                raise ValueError(f"device {device} is not one of this node's")
            devices.append(PreparedDevice(device, (), (self.specs.device_id(uid, device),), vnpu=vnpu))
        return PreparedClaim(ClaimRef.of_uid(uid), self.pool, tuple(devices), PREPARED, recovered=True)

    def _hold_sweeps(self, why: str) -> None:
        if self.keeper is not None:
            self.keeper.hold_sweeps(f"the checkpoint {self.checkpoint.path} was lost and {why}")

    async def _restore_specs(self) -> None:
        for uid, claim in self.claims.items():
            if claim.lost:
                await self._remove_lost_spec(claim)
                continue
            if self.specs.path(uid).exists():
                continue
            try:
                await anyio.to_thread.run_sync(self.specs.write, uid, _nodes(claim.devices, self.inventory))
            except OSError as error:
                log.error("cannot write the CDI spec of prepared claim %s: %s", claim.ref, error)
            else:
                log.info("wrote the missing CDI spec of prepared claim %s", claim.ref, extra={"uid": uid})
        try:
            present = self.specs.listed()
        except OSError:
            present = set()
        for uid in present - self.claims.keys() - self._unread_specs:
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
            changed |= self._forget_gone(phy, present)
        return changed

    async def _remove_lost_spec(self, claim: PreparedClaim) -> None:
        """Remove the spec of a claim whose vNPU is gone: a pod of it must not get what its id names now."""
        try:
            await anyio.to_thread.run_sync(self.specs.remove, claim.ref.uid)
        except OSError as error:
            log.error(
                "cannot remove the CDI spec of ResourceClaim %s, whose vNPU is gone: %s", claim.ref, error
            )

    async def sweep_strays(self) -> None:
        """Sweep each chip a create left in doubt once a poll (the inventory) shows a vNPU no claim owns:
        a create that timed out may finish in the driver later. Driver calls only for such a chip."""
        keeper = self.keeper
        if keeper is None or keeper.held or not (doubtful := sorted(keeper.unswept)):
            return
        async with self._lock:
            with anyio.CancelScope(shield=True):
                for phy in doubtful:
                    state = self.inventory.get(phy)
                    shown = {vnpu.vdev_id for vnpu in (state.vnpus or ())} if state is not None else set()
                    if phy not in keeper.unswept or not shown - self._owned(phy):
                        continue  # swept meanwhile (a Prepare), or nothing there that no claim owns
                    try:
                        await keeper.sweep(phy, self._owned(phy))
                    except VnpuError as error:
                        log.warning("cannot sweep the vNPUs of chip %d yet: %s", phy, error)

    def _forget_gone(self, phy_id: int, present: Collection[VdevInfo]) -> bool:
        """Forget the ids of prepared claims' vNPUs on the chip that are not ``present`` (an id now of
        another template counts as gone: given to another since); True if any."""
        there = {(vnpu.vdev_id, vnpu.template) for vnpu in present}
        changed = False
        for uid, claim in list(self.claims.items()):
            gone = [
                v
                for v in claim.vnpus
                if v.phy_id == phy_id and v.vdev_id is not None and (v.vdev_id, v.template) not in there
            ]
            for vnpu in gone:
                log.error(
                    "vNPU %s of prepared ResourceClaim %s on chip %d is gone (destroyed outside the plugin, "
                    "or the plugin stopped while unpreparing the claim); its pods have lost it, its CDI spec "
                    "is removed, and preparing it again fails",
                    vnpu.vdev_id,
                    claim.ref,
                    phy_id,
                    extra={"uid": uid, "chip": phy_id, "vnpu": vnpu.vdev_id},
                )
            if gone:
                self.claims[uid] = _forgetting(claim, {(vnpu.phy_id, vnpu.vdev_id) for vnpu in gone})
                changed = True
        return changed

    async def _save(self, claims: Mapping[str, PreparedClaim]) -> str:
        """Write the checkpoint; what failed ("" when written)."""
        try:
            await anyio.to_thread.run_sync(self.checkpoint.save, claims)
        except OSError as error:
            return f"cannot write the checkpoint {self.checkpoint.path}: {error.strerror or error}"
        return ""

    async def _save_logged(self, claims: Mapping[str, PreparedClaim]) -> bool:
        failed = await self._save(claims)
        if failed:
            log.error("%s", failed)
        return not failed

    # -- prepare --------------------------------------------------------------------------

    async def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, Outcome]:
        """An outcome per claim UID; the new ones are checkpointed before this returns."""
        async with self._lock:
            deadline = anyio.current_time() + API_BUDGET
            outcomes: dict[str, Outcome] = {}
            new: dict[str, PreparedClaim] = {}
            for ref in refs:
                if ref.uid in outcomes:
                    continue
                known = self.claims.get(ref.uid)
                try:
                    if known is None:
                        new[ref.uid] = await self._prepare_one(ref, new, deadline)
                    elif known.recovered:
                        new[ref.uid] = await self._prepare_recovered(ref, known, deadline)
                    else:
                        outcomes[ref.uid] = Outcome(await self._prepared_again(known))
                        continue
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
                outcomes[ref.uid] = Outcome(new[ref.uid])
            if new:
                outcomes.update(await self._record(new))
            return outcomes

    async def _prepared_again(self, claim: PreparedClaim) -> PreparedClaim:
        """A prepared claim asked for again: as it was, if its vNPUs are still there; else CannotServe and
        its spec goes (a gone vNPU's id may name another claim's vNPU by now)."""
        if self.keeper is not None and claim.vnpus and not claim.lost:
            with anyio.CancelScope(shield=True):
                for phy in sorted({vnpu.phy_id for vnpu in claim.vnpus}):
                    try:
                        present = await self.keeper.lifecycle.present(phy)
                    except VnpuError as error:
                        raise CannotServe(
                            "vnpu",
                            f"ResourceClaim {claim.ref}: cannot make sure its vNPU is still there: {error}; "
                            "the kubelet retries",
                        ) from None
                    if self._forget_gone(phy, present):
                        await self._save_logged(self.claims)
                claim = self.claims[claim.ref.uid]
        if not claim.lost:
            return claim
        with anyio.CancelScope(shield=True):
            await self._remove_lost_spec(claim)
        gone = ", ".join(f"a vNPU of template {v.template} on chip {v.phy_id}" for v in claim.lost)
        raise CannotServe(
            "vnpu",
            f"ResourceClaim {claim.ref} was prepared with {gone}, which is gone (destroyed outside the "
            "plugin, e.g. by npu-smi): its pods lost it and it is not made again for them; delete the "
            "claim's pods (a claim of their own template goes with them; a claim made apart must be made "
            "again)",
        )

    async def _read_claim(self, ref: ClaimRef, deadline: float) -> Mapping[str, object]:
        """The claim from the API server, within what is left of the call's budget; else Unavailable."""
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            raise Unavailable(
                "api",
                f"ResourceClaim {ref} was not read: the API server took this call's whole budget "
                f"({API_BUDGET:g} s) on the claims before it; the kubelet retries",
            )
        if self.kube is None:
            raise Unavailable(
                "api",
                f"cannot read ResourceClaim {ref}: the API client is not set up yet (see the plugin's log); "
                "the kubelet retries",
            )
        with anyio.move_on_after(remaining):
            try:
                return await self.kube.get(RESOURCE_CLAIMS, ref.name, ref.namespace)
            except NotFound:
                raise CannotServe("claim", f"ResourceClaim {ref} does not exist (any more)") from None
            except KubeError as error:
                raise Unavailable(
                    "api", f"cannot read ResourceClaim {ref}: {error}; the kubelet retries"
                ) from None
        raise Unavailable(
            "api",
            f"ResourceClaim {ref}: the API server did not answer within {remaining:.0f} s; "
            "the kubelet retries",
        )

    async def _prepare_recovered(self, ref: ClaimRef, known: PreparedClaim, deadline: float) -> PreparedClaim:
        """A claim rebuilt from its spec, asked for again: the spec's devices and vNPUs, the allocation's
        requests and shares; an allocation of other devices is refused, nothing touched."""
        known = await self._prepared_again(known)  # its vNPUs still there
        claim = await self._read_claim(ref, deadline)
        allocated = allocated_devices(claim, ref, self.driver, self.pool)
        by_name = {device.device: device for device in known.devices}
        if sorted(device.device for device in allocated) != sorted(by_name):
            raise CannotServe(
                "claim",
                f"ResourceClaim {ref} is allocated {', '.join(d.device for d in allocated) or 'nothing'} of "
                f"this pool, but its CDI spec (the record of it since the checkpoint was lost) names "
                f"{', '.join(sorted(by_name))}; unprepare it and prepare it again",
            )
        devices = tuple(
            dataclasses.replace(
                by_name[device.device],
                requests=device.requests,
                admin_access=device.admin_access,
                share_id=device.share_id,
            )
            for device in allocated
        )
        return dataclasses.replace(known, ref=ref, devices=devices, recovered=False)

    async def _prepare_one(
        self, ref: ClaimRef, pending: Mapping[str, PreparedClaim], deadline: float
    ) -> PreparedClaim:
        self.specs.path(ref.uid)  # a UID that cannot name a spec file is refused before anything is made
        claim = await self._read_claim(ref, deadline)
        allocated = allocated_devices(claim, ref, self.driver, self.pool)
        devices = [self._checked(ref, device, pending) for device in allocated]
        prepared = PreparedClaim(ref, self.pool, tuple(devices), PREPARING)
        with anyio.CancelScope(shield=True):  # vNPUs, spec and checkpoint: never left apart by a cancel
            if prepared.vnpus:
                prepared = await self._make_vnpus(prepared, pending)
            try:
                nodes = _nodes(prepared.devices, self.inventory)
                ids = await anyio.to_thread.run_sync(self.specs.write, ref.uid, nodes)
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
            if failed := await self._save(claims):
                message = f"{failed}; the plugin directory must be writable"
                log.error("%s", message)
                for uid, claim in new.items():
                    await anyio.to_thread.run_sync(self.specs.remove, uid)
                    await self._undo(claim)
                self.stats.errors["io"] += len(new)
                return {uid: Outcome(None, message) for uid in new}
            self.claims = claims
        self.stats.prepared += len(new)
        if self.held is not None:
            self.held.handed(
                chip
                for claim in new.values()
                for device in claim.devices
                if (chip := chip_of(device.device)) is not None
            )
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
                    if failed := await self._save(remaining):
                        # The claims stay, their vNPUs' ids forgotten: the next write records that too.
                        message = f"{failed}; the kubelet retries"
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


def _nodes(devices: Sequence[PreparedDevice], inventory: Inventory) -> dict[str, DeviceNode]:
    """The device node each device hands over: its vNPU's, or its chip's."""
    nodes: dict[str, DeviceNode] = {}
    for device in devices:
        if device.vnpu is not None:
            if device.vnpu.vdev_id is not None:
                nodes[device.device] = vnpu_node(device.vnpu.vdev_id)
        elif (phy := phy_of(device.device)) is not None:
            state = inventory.get(phy)
            nodes[device.device] = chip_node(phy) if state is None else node_of(inventory.table, state)
    return nodes


def _described(device: PreparedDevice) -> str:
    if device.vnpu is not None:
        return f"{device.device} (vNPU {device.vnpu.vdev_id}, {device.vnpu.template})"
    return device.device + (f" (share {device.share_id})" if device.share_id else "")
