"""vNPUs made and destroyed for claims: the chip calls, on each chip's own lane, with their errors in words.

The preparer decides which vNPU a claim gets and when; this module makes the
calls: ``dcmi_create_vdevice`` with the partition's template on the chip the
allocation names, ``dcmi_set_destroy_vdevice``, and the VDEV_MNG list of a
chip's vNPUs. Each runs on the chip's lane of :class:`~ascend_plugin.chip_calls.ChipCalls`
(one call at a time per chip, a timeout, a hung chip never holding up
another), and every failure leaves as a :class:`VnpuError` whose message says
what was asked, what the driver answered and what happens next, because it
reaches the pod's events through the kubelet.
"""

from __future__ import annotations

from typing import Final, Protocol

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.resilience import describe
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import TEMPORARY_CODES, ChipError, DcmiError
from backends.library import VdevInfo

RESOURCE_OCCUPIED: Final = -8020


class VnpuError(Exception):
    """A vNPU could not be made, destroyed or listed; the message says why and what happens next.

    ``temporary``: the same call may succeed later (the kubelet's retry, or
    the next look) rather than never on this chip.
    """

    def __init__(self, message: str, *, temporary: bool = True) -> None:
        super().__init__(message)
        self.temporary = temporary


class VnpuLifecycle(Protocol):
    """Making, destroying and listing the vNPUs of a chip (blocking calls run elsewhere)."""

    async def create(self, phy_id: int, template: str) -> int:
        """Make a vNPU of ``template``; its id. VnpuError when it cannot."""
        ...

    async def destroy(self, phy_id: int, vdev_id: int) -> None:
        """Destroy vNPU ``vdev_id``. VnpuError when it cannot."""
        ...

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
            raise VnpuError(f"the node has no chip {phy_id}", temporary=False)
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
                f"the driver refused a vNPU of template {template} on {self._label(phy_id)}: {error}",
                temporary=error.code in TEMPORARY_CODES,
            ) from None
        except (ChipError, ChipCallError, ValueError) as error:
            raise VnpuError(
                f"cannot make a vNPU of template {template} on {self._label(phy_id)}: {describe(error)}"
            ) from None

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
        state = self.inventory.get(phy_id)
        if state is not None and state.vnpus is not None:
            self.inventory.set_vnpus(phy_id, tuple(v for v in state.vnpus if v.vdev_id != vdev_id))

    async def present(self, phy_id: int) -> list[VdevInfo]:
        chip = self._chip(phy_id)
        try:
            return await self.calls.call(phy_id, "vnpus", self.backend.vnpus, chip)
        except (ChipError, ChipCallError) as error:
            raise VnpuError(f"cannot list the vNPUs of {self._label(phy_id)}: {describe(error)}") from None
