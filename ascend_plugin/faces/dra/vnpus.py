"""The vNPUs of chips split on demand: made for claims on each chip's lane, destroyed after them, none left
that no claim owns. Each failure is a :class:`VnpuError` whose message reaches the pod's events.
docs/dra.md, "vNPUs made on demand".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence
from typing import Final, Protocol

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.faces.dra.checkpoint import OwnedVnpu
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.resilience import describe
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError, DcmiError
from backends.library import VdevInfo

log = logging.getLogger(__name__)

RESOURCE_OCCUPIED: Final = -8020


class VnpuError(Exception):
    """A vNPU could not be made, destroyed or listed; the message says why and what happens next."""


class VnpuLifecycle(Protocol):
    """Making, destroying and listing the vNPUs of a chip (blocking calls run elsewhere)."""

    async def create(self, phy_id: int, template: str) -> int:
        """Make a vNPU of ``template``; its id. VnpuError when it cannot."""
        ...

    async def destroy(self, phy_id: int, vdev_id: int) -> None: ...

    async def present(self, phy_id: int) -> list[VdevInfo]:
        """The chip's vNPUs now. VnpuError when they cannot be read."""
        ...


class ChipVnpus:
    """:class:`VnpuLifecycle` over the node's backend, on the chips' lanes."""

    def __init__(self, backend: ChipBackend, calls: ChipCalls, inventory: Inventory) -> None:
        self.backend = backend
        self.calls = calls
        self.inventory = inventory

    def _label(self, phy_id: int) -> str:
        return self.inventory.table.chip_id(phy_id)

    def _chip(self, phy_id: int) -> Chip:
        state = self.inventory.get(phy_id)
        if state is None:
            raise VnpuError(f"the node has no chip {phy_id}")
        return state.chip

    async def create(self, phy_id: int, template: str) -> int:
        chip = self._chip(phy_id)
        try:
            return await self.calls.call(phy_id, "create_vnpu", self.backend.create_vnpu, chip, template)
        except DcmiError as error:
            if error.code == RESOURCE_OCCUPIED:
                raise VnpuError(
                    f"{self._label(phy_id)} has no room for a vNPU of template {template} beside its vNPUs "
                    f"({error}); the kubelet retries, and the claim is prepared once the room is free",
                ) from None
            raise VnpuError(
                f"the driver refused a vNPU of template {template} on {self._label(phy_id)}: {error}"
            ) from None
        except (ChipError, ChipCallError, ValueError) as error:
            raise VnpuError(
                f"cannot make a vNPU of template {template} on {self._label(phy_id)}: {describe(error)}"
            ) from None
        finally:
            self.inventory.vnpus_edited(phy_id)  # a poll's read begun before this may miss the new vNPU

    async def destroy(self, phy_id: int, vdev_id: int) -> None:
        """Destroy the vNPU, and drop it from the chip's vNPUs at once (not at the next poll): a claim for
        the whole chip prepared right after must not be refused as "split" (seen on the real kubelet)."""
        chip = self._chip(phy_id)
        try:
            await self.calls.call(phy_id, "destroy_vnpu", self.backend.destroy_vnpu, chip, vdev_id)
        except (ChipError, ChipCallError, ValueError) as error:
            busy = isinstance(error, DcmiError) and error.code == RESOURCE_OCCUPIED
            raise VnpuError(
                f"cannot destroy vNPU {vdev_id} on {self._label(phy_id)}: {describe(error)}"
                + ("; a container still uses it" if busy else "")
            ) from None
        finally:
            self.inventory.vnpus_edited(phy_id)  # a poll's read begun before this may show it still there
        state = self.inventory.get(phy_id)
        if state is not None and state.vnpus is not None:
            self.inventory.set_vnpus(phy_id, tuple(v for v in state.vnpus if v.vdev_id != vdev_id))

    async def present(self, phy_id: int) -> list[VdevInfo]:
        chip = self._chip(phy_id)
        try:
            return await self.calls.call(phy_id, "vnpus", self.backend.vnpus, chip)
        except (ChipError, ChipCallError) as error:
            raise VnpuError(f"cannot list the vNPUs of {self._label(phy_id)}: {describe(error)}") from None


class UnmakeFailed(VnpuError):
    """Some of a claim's vNPUs could not be destroyed; ``left`` are the ones still there."""

    def __init__(self, message: str, left: Sequence[OwnedVnpu]) -> None:
        super().__init__(message)
        self.left = tuple(left)


class VnpuKeeper:
    """Makes and destroys the vNPUs of the chips in ``chips`` (physical ids) for claims."""

    def __init__(self, lifecycle: VnpuLifecycle, chips: Collection[int]) -> None:
        self.lifecycle = lifecycle
        self.chips = frozenset(chips)
        self.unswept: set[int] = set(chips)  # not swept cleanly since start or since a doubtful call
        self.made = 0
        self.destroyed = 0
        self.swept = 0  # vNPUs no claim owned, destroyed
        self.held = ""  # why no chip is swept in this run (empty: sweeps go ahead)

    def hold_sweeps(self, why: str) -> None:
        """Destroy no vNPU no claim is known to own, for the rest of the run; said once."""
        if not self.held:
            log.error(
                "no vNPU is destroyed as owned by no claim until the plugin restarts: %s; a vNPU left "
                "behind stays until then (npu-smi info -t info-vnpu lists them)",
                why,
                extra={"reason": why},
            )
        self.held = why

    async def sweep(self, phy_id: int, owned: Collection[int]) -> list[VdevInfo]:
        """Destroy the chip's vNPUs whose ids are not in ``owned``; the chip's vNPUs after that. VnpuError
        when they cannot be listed; one that cannot be destroyed leaves the chip unswept."""
        present = await self.lifecycle.present(phy_id)
        if self.held:
            return present
        clean = True
        kept = []
        for vnpu in present:
            if vnpu.vdev_id in owned:
                kept.append(vnpu)
                continue
            try:
                await self.lifecycle.destroy(phy_id, vnpu.vdev_id)
            except VnpuError as error:
                clean = False
                kept.append(vnpu)
                log.error(
                    "vNPU %d (%s) on chip %d belongs to no prepared claim and cannot be destroyed: %s",
                    vnpu.vdev_id,
                    vnpu.template,
                    phy_id,
                    error,
                    extra={"chip": phy_id, "vnpu": vnpu.vdev_id},
                )
                continue
            self.swept += 1
            log.warning(
                "destroyed vNPU %d (%s) on chip %d: no prepared claim owns it (left by a plugin that stopped "
                "while preparing, or made outside it on a chip in dynamic mode)",
                vnpu.vdev_id,
                vnpu.template,
                phy_id,
                extra={"chip": phy_id, "vnpu": vnpu.vdev_id, "template": vnpu.template},
            )
        if clean:
            self.unswept.discard(phy_id)
        return kept

    async def make(self, wanted: Sequence[OwnedVnpu], owned: Collection[int]) -> list[OwnedVnpu]:
        """Make ``wanted``, sweeping an unswept chip first (``owned``: the ids claims own); the same with
        their ids. VnpuError: none is left made."""
        made: list[OwnedVnpu] = []
        try:
            for vnpu in wanted:
                if vnpu.phy_id in self.unswept:
                    await self.sweep(vnpu.phy_id, owned)
                try:
                    vdev_id = await self.lifecycle.create(vnpu.phy_id, vnpu.template)
                except VnpuError:
                    # A create that timed out may still finish in the driver: look before the chip's next one.
                    self.unswept.add(vnpu.phy_id)
                    raise
                self.made += 1
                made.append(dataclasses.replace(vnpu, vdev_id=vdev_id))
        except VnpuError:
            try:
                await self.unmake(made)
            except UnmakeFailed as failed:
                self.unswept.update(left.phy_id for left in failed.left)  # swept before the next make
            raise
        return made

    async def unmake(self, vnpus: Sequence[OwnedVnpu]) -> None:
        """Destroy ``vnpus`` whose ids still name a vNPU of their template (one gone, or given to another, is
        left); UnmakeFailed names those still there."""
        left: list[OwnedVnpu] = []
        problems: list[str] = []
        for vnpu in vnpus:
            if vnpu.vdev_id is None:
                continue
            try:
                present = {v.vdev_id: v.template for v in await self.lifecycle.present(vnpu.phy_id)}
                template = present.get(vnpu.vdev_id)
                if template == vnpu.template:
                    await self.lifecycle.destroy(vnpu.phy_id, vnpu.vdev_id)
                    self.destroyed += 1
                elif template is not None:
                    log.warning(
                        "vNPU %d on chip %d is of template %s, not %s as the claim's was: the claim's is "
                        "gone and the id was given to another vNPU since, which is left alone",
                        vnpu.vdev_id,
                        vnpu.phy_id,
                        template,
                        vnpu.template,
                        extra={"chip": vnpu.phy_id, "vnpu": vnpu.vdev_id, "template": template},
                    )
            except VnpuError as error:
                left.append(vnpu)
                problems.append(str(error))
        if left:
            raise UnmakeFailed("; ".join(problems), left)
