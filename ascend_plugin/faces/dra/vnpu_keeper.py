"""The vNPUs of chips split on demand: made for claims, destroyed after them, none left that no claim owns.

On a chip in dynamic mode (``vnpu=dynamic``) every vNPU is the driver's, made
for a prepared claim. :class:`VnpuKeeper` holds to that:

* :meth:`~VnpuKeeper.make` makes a claim's vNPUs one after the other; if one
  cannot be made, the ones made before it are destroyed again, so a claim gets
  all of its vNPUs or none;
* :meth:`~VnpuKeeper.unmake` destroys them, skipping one that is gone already
  (or whose id now names a vNPU of another template, made since), and says
  which ones are still there when one cannot be destroyed;
* :meth:`~VnpuKeeper.sweep` destroys every vNPU of a chip that no claim owns
  (a vNPU made by a plugin killed before it wrote down its id, or by a create
  that timed out and finished in the driver later), one log line each: at
  start for every chip, and before any vNPU is made on a chip that was not
  swept cleanly since, and as soon as such a chip shows a vNPU no claim owns
  (a create that timed out and finished later);
* :meth:`~VnpuKeeper.hold_sweeps` stops sweeping for the run, when what the
  claims own is not fully known (a lost checkpoint whose CDI specs could not
  all be read): nothing is destroyed that might be a claim's.

The preparer says which vNPUs are owned (its checkpoint); the keeper makes
the calls (:mod:`~ascend_plugin.faces.dra.vnpus`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence

from ascend_plugin.faces.dra.checkpoint import OwnedVnpu
from ascend_plugin.faces.dra.vnpus import VnpuError, VnpuLifecycle
from backends.library import VdevInfo

log = logging.getLogger(__name__)


class UnmakeFailed(Exception):
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
        """Destroy the chip's vNPUs whose ids are not in ``owned``; the chip's vNPUs after that.

        VnpuError when the chip's vNPUs cannot be listed; a vNPU that cannot
        be destroyed is logged and leaves the chip unswept (it is tried again
        before the chip's next vNPU is made).
        """
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
        """Make ``wanted`` (chip and template each); the same with their ids. VnpuError: none is left made.

        A chip not swept cleanly is swept first (``owned``: the ids claims own).
        """
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
        """Destroy ``vnpus``; one already gone is skipped. UnmakeFailed names those still there.

        A vNPU is destroyed only if its id still names one of its template: an
        id the driver handed to a vNPU of another template is not the claim's.
        """
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
