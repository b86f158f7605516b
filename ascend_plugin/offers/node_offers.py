"""The node's offers (whole chips or shares, static vNPUs) and which a node gets, the plugin's and doctor's.

A chip is offered once as Huawei names it (``Ascend910-3``), or ``share_count`` times where the family
shares chips (``Ascend310P-1-0``); static vNPUs under their template's resource (``Ascend310P-2c-100-0``).
:func:`plan_dra` is the DRA driver's counterpart. docs/sharing.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from ascend_plugin.grpc_guard.status import listed
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, Offer, OfferedDevice, chip_health
from ascend_plugin.settings import Settings, SettingsError, how_to_set
from backends.backend import VNPU_MAKING, ChipBackend
from backends.families import sharing_families, vnpu_families
from backends.family_table import FamilyTable
from backends.library import VdevInfo
from backends.vnpu_split import ChipSplits

log = logging.getLogger(__name__)

SHARE_COUNT_IGNORED = "ShareCountIgnored"
DYNAMIC_VNPU_IGNORED = "DynamicVnpuIgnored"
NOT_SPLIT_ON_DEMAND = "NotSplitOnDemand"
DEVICE_SHARE_NEEDED = "DeviceShareNeeded"
_LISTED = 8  # chips named in one message


# Each template's resource suffix: Huawei's table (GetTemplateName2DeviceTypeMap), which clusters request.
VNPU_TEMPLATES: Mapping[str, str] = MappingProxyType(
    {
        # 310P and the first-generation 910
        "vir01": "1c",
        "vir02": "2c",
        "vir04": "4c",
        "vir08": "8c",
        "vir16": "16c",
        "vir02_1c": "2c.1cpu",
        "vir04_3c": "4c.3cpu",
        "vir04_3c_ndvpp": "4c.3cpu.ndvpp",
        "vir04_4c_dvpp": "4c.4cpu.dvpp",
        # 910B
        "vir03_1c_8g": "3c.1cpu.8g",
        "vir05_1c_8g": "5c.1cpu.8g",
        "vir05_1c_16g": "5c.1cpu.16g",
        "vir06_1c_16g": "6c.1cpu.16g",
        "vir10_3c_16g": "10c.3cpu.16g",
        "vir10_3c_16g_nm": "10c.3cpu.16g.ndvpp",
        "vir10_3c_32g": "10c.3cpu.32g",
        "vir10_4c_16g_m": "10c.4cpu.16g.dvpp",
        "vir12_3c_32g": "12c.3cpu.32g",
    }
)


# -- the offers: whole chips (or shares of them), static vNPUs -----------------------------------------


def chip_node(number: int) -> DeviceNode:
    """The chip's own node, ``/dev/davinci<N>``, the same path inside (N: the family's device number)."""
    return DeviceNode(f"/dev/davinci{number}", f"/dev/davinci{number}")


def node_of(table: FamilyTable, state: ChipState) -> DeviceNode:
    """The chip's own node: ``/dev/davinci<physical id>``, on a 950 ``/dev/davinci<logical id>``."""
    return chip_node(table.device_number(state.chip))


def chip_device(table: FamilyTable, form: IdForm, state: ChipState, device_id: str) -> OfferedDevice:
    """A device that hands over the chip of ``state`` whole; its node and ``ASCEND_VISIBLE_DEVICES`` by
    the family's device number (the logical id on a 950)."""
    healthy, reason = chip_health([state])
    return OfferedDevice(
        id=device_id,
        resource=table.resource_name,
        form=form,
        chips=(state.phy_id,),
        node=node_of(table, state),
        visible=str(table.device_number(state.chip)),
        cdi_name=str(state.phy_id),
        healthy=healthy,
        reason=reason,
        unit=state.unit,
        numa_node=state.numa_node,
    )


class WholeChips:
    """Every chip that carries no vNPUs as ``shares`` devices of the family's resource (one: the chip)."""

    def __init__(self, shares: int = 1) -> None:
        self.shares = shares
        self._withdrawn: set[int] = set()  # shared chips that carry vNPUs now (and were said so)

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        fields = ("physical id",) if self.shares == 1 else ("physical id", "share")
        form = IdForm(table.device_id_prefix, fields)
        devices: list[OfferedDevice] = []
        for state in inventory.chips():
            if self._split(table, state):
                continue
            chip_id = table.chip_id(state.phy_id)
            ids = [chip_id] if self.shares == 1 else [f"{chip_id}-{index}" for index in range(self.shares)]
            devices += [chip_device(table, form, state, device_id) for device_id in ids]
        return devices

    def _split(self, table: FamilyTable, state: ChipState) -> bool:
        """True when the chip carries vNPUs now; the first time, a shared chip's warning says so."""
        if not state.split:
            self._withdrawn.discard(state.phy_id)
            return False
        if self.shares > 1 and state.phy_id not in self._withdrawn:
            self._withdrawn.add(state.phy_id)
            log.warning(
                "%s now carries vNPUs: its %d shares are withdrawn and its vNPUs offered instead "
                "(share_count and vNPUs on one chip do not go together)",
                table.chip_id(state.phy_id),
                self.shares,
                extra={"chip": state.phy_id},
            )
        return True


def vnpu_node(vdev_id: int) -> DeviceNode:
    """The vNPU's node: the host's ``/dev/vdavinci<vdev>``, seen as ``/dev/davinci<vdev>`` inside."""
    return DeviceNode(f"/dev/vdavinci{vdev_id}", f"/dev/davinci{vdev_id}")


def vnpu_resource(table: FamilyTable, suffix: str) -> str:
    """``huawei.com/Ascend310P`` and ``2c`` -> ``huawei.com/Ascend310P-2c``."""
    return f"{table.resource_name}-{suffix}"


class StaticVnpus:
    """Every vNPU with a known template as one device of that template's resource."""

    def __init__(self) -> None:
        self._skipped: set[str] = set()  # templates outside the table, already warned of

    def devices(self, inventory: Inventory) -> list[OfferedDevice]:
        table = inventory.table
        devices = []
        for state in inventory.chips():
            for vnpu in state.vnpus or ():
                suffix = VNPU_TEMPLATES.get(vnpu.template)
                if suffix is None:
                    self._skip(table, state, vnpu)
                    continue
                devices.append(self._device(table, state, vnpu, suffix))
        return devices

    def _skip(self, table: FamilyTable, state: ChipState, vnpu: VdevInfo) -> None:
        if vnpu.template in self._skipped:
            return
        self._skipped.add(vnpu.template)
        log.warning(
            "vNPU %d on %s has template %r, which has no resource name: it is not offered (known "
            "templates: %s)",
            vnpu.vdev_id,
            table.chip_id(state.phy_id),
            vnpu.template,
            ", ".join(VNPU_TEMPLATES),
            extra={"template": vnpu.template, "vnpu": vnpu.vdev_id, "chip": state.phy_id},
        )

    @staticmethod
    def _device(table: FamilyTable, state: ChipState, vnpu: VdevInfo, suffix: str) -> OfferedDevice:
        prefix = f"{table.device_id_prefix}-{suffix}"
        healthy, reason = chip_health([state])
        return OfferedDevice(
            id=f"{prefix}-{vnpu.vdev_id}-{state.phy_id}",
            resource=vnpu_resource(table, suffix),
            form=IdForm(prefix, ("vNPU id", "physical id")),
            chips=(state.phy_id,),
            node=vnpu_node(vnpu.vdev_id),
            visible=str(vnpu.vdev_id),
            cdi_name=f"vnpu-{vnpu.vdev_id}",
            healthy=healthy,
            reason=reason,
            virtual=True,
            unit=state.unit,
            numa_node=state.numa_node,
        )


# -- which offers the node gets ----------------------------------------------------------------------


@dataclass(frozen=True)
class OfferSettings:
    share_count: int = 1
    vnpu: Literal["static", "dynamic", "off"] = "static"
    partition_places: int = 0  # vnpu=dynamic: partitions of each template a chip offers (0: all that fit)

    @classmethod
    def from_settings(cls, settings: Settings) -> OfferSettings:
        return cls(settings.share_count, settings.vnpu, settings.dra_partition_places)


@dataclass(frozen=True)
class Notice:
    """Something about the node's offers an operator should hear of once, at start (logged at ``level``).
    Warnings are also a node Event (of ``reason``) and in ``doctor``'s report."""

    reason: str
    message: str
    level: int = logging.WARNING


@dataclass(frozen=True)
class OfferPlan:
    """The offers the node's OfferBook is built from, and what to tell the operator about them."""

    offers: tuple[Offer, ...]
    notices: tuple[Notice, ...] = ()
    sharing: bool = False  # each chip is offered share_count times

    @property
    def warnings(self) -> tuple[Notice, ...]:
        return tuple(notice for notice in self.notices if notice.level >= logging.WARNING)


class SharingRefused(SettingsError):
    """share_count asks to share chips that carry vNPUs; the message names both settings and the chips."""


def plan_offers(settings: OfferSettings, inventory: Inventory, family: ChipBackend) -> OfferPlan:
    """The node's offers, as ``family`` (the node's backend) allows; SharingRefused: shares meet vNPUs."""
    chips = inventory.chips()
    sharing, notices = _sharing(settings, inventory, family)
    offers: list[Offer] = []
    if sharing:
        split = [state for state in chips if state.split]
        if split:
            raise SharingRefused(_sharing_refused(settings, inventory, split))
        offers.append(WholeChips(settings.share_count))
        notices.append(_device_share_needed(settings.share_count, chips))
    else:
        offers.append(WholeChips())
    if settings.vnpu == "static" and not family.vnpu_absence():
        offers.append(StaticVnpus())
    return OfferPlan(tuple(offers), tuple(notices), sharing)


def _sharing(settings: OfferSettings, inventory: Inventory, family: ChipBackend) -> tuple[bool, list[Notice]]:
    """Whether each chip is offered share_count times; a warning where the family ignores share_count."""
    if settings.share_count > 1 and family.share_count(settings.share_count) == 1:
        return False, [_share_count_ignored(settings.share_count, inventory)]
    return settings.share_count > 1, []


@dataclass(frozen=True)
class DraPlan:
    """What the DRA driver publishes besides whole chips: partitions of the chips that split, shares."""

    splits: Mapping[int, ChipSplits]
    share_count: int = 1
    notices: tuple[Notice, ...] = ()
    maker: ChipBackend | None = None  # the backend that makes the partitions' vNPUs (splits not empty)

    @property
    def warnings(self) -> tuple[Notice, ...]:
        return tuple(notice for notice in self.notices if notice.level >= logging.WARNING)


def plan_dra(settings: OfferSettings, inventory: Inventory, family: ChipBackend) -> DraPlan:
    """The DRA driver's plan: ``vnpu=dynamic`` where no vNPU can be made is ignored with a warning, like
    ``share_count``; SharingRefused when sharing meets vNPUs (made or static), as in :func:`plan_offers`.
    """
    chips = inventory.chips()
    sharing, notices = _sharing(settings, inventory, family)
    dynamic = settings.vnpu == "dynamic"
    if dynamic and (absence := family.vnpu_absence()):
        notices.append(_dynamic_ignored(inventory, absence))
        dynamic = False
    if dynamic and (lacking := family.lacking(*VNPU_MAKING)):
        notices.append(_driver_cannot_make(inventory, lacking))
        dynamic = False
    if sharing:
        split = [state for state in chips if state.split]
        if split or dynamic:
            raise SharingRefused(_sharing_refused(settings, inventory, split))
        notices.append(_device_share_needed(settings.share_count, chips))
    splits: dict[int, ChipSplits] = {}
    if dynamic:
        for state in chips:
            found = family.splits(state.chip, state.ai_cores, state.memory_mb)
            if found is not None:
                splits[state.phy_id] = replace(found, places=settings.partition_places)
        unsplit = [state for state in chips if state.phy_id not in splits]
        if unsplit:
            notices.append(_not_split_on_demand(inventory, unsplit))
    return DraPlan(splits, settings.share_count if sharing else 1, tuple(notices), family if splits else None)


def _driver_cannot_make(inventory: Inventory, lacking: Sequence[str]) -> Notice:
    return Notice(
        DYNAMIC_VNPU_IGNORED,
        f"vnpu=dynamic: the chip library {inventory.facts.library} has no {' or '.join(lacking)}, so no "
        "vNPU can be made on demand; the chips are published whole. A driver whose npu-smi makes vNPUs "
        "(npu-smi set -t create-vnpu) has them",
    )


def _dynamic_ignored(inventory: Inventory, absence: str) -> Notice:
    return Notice(
        DYNAMIC_VNPU_IGNORED,
        f"vnpu=dynamic is ignored on this node: its chips {_chips(inventory, inventory.chips())} are of "
        f"family {inventory.table.family}: {absence}; only {vnpu_families()} have vNPUs. The "
        "chips are published whole",
    )


def _not_split_on_demand(inventory: Inventory, states: Sequence[ChipState]) -> Notice:
    facts = "; ".join(
        f"{inventory.table.chip_id(state.phy_id)}: {_fmt(state.ai_cores)} AI cores, "
        f"{_fmt(state.memory_mb)} MiB"
        for state in states[:_LISTED]
    )
    return Notice(
        NOT_SPLIT_ON_DEMAND,
        f"vnpu=dynamic: chips {_chips(inventory, states)} are published whole only: their AI cores or "
        f"memory are unknown, or none of the family's vNPU templates divides them ({facts})",
    )


def _fmt(value: float | int | None) -> str:
    return "unknown" if value is None else f"{value:g}"


def _chips(inventory: Inventory, states: Sequence[ChipState]) -> str:
    kinds = ", ".join(sorted({state.chip.info.chip_name for state in states}))
    return f"{listed([inventory.table.chip_id(state.phy_id) for state in states], _LISTED)} ({kinds})"


def _share_count_ignored(count: int, inventory: Inventory) -> Notice:
    table = inventory.table
    return Notice(
        SHARE_COUNT_IGNORED,
        f"{how_to_set('share_count', count)} is ignored on this node: its chips "
        f"{_chips(inventory, inventory.chips())} are of family {table.family}, whose driver does not "
        f"share a chip; only {sharing_families()} do. The chips are offered whole, as "
        f"{table.resource_name}",
    )


def _device_share_needed(count: int, chips: Sequence[ChipState]) -> Notice:
    commands = sorted({(state.chip.card_id, state.chip.device_id) for state in chips})
    shown = "; ".join(
        f"npu-smi set -t device-share -i {card} -c {chip} -d 1" for card, chip in commands[:_LISTED]
    )
    more = f" (and {len(commands) - _LISTED} more chips)" if len(commands) > _LISTED else ""
    return Notice(
        DEVICE_SHARE_NEEDED,
        f"share_count={count}: each chip is offered {count} times; pods can share a chip only while "
        f"the driver's device-share mode is on, which the plugin cannot check. Turn it on per chip on "
        f"the host: {shown}{more}",
        logging.INFO,
    )


def _sharing_refused(settings: OfferSettings, inventory: Inventory, split: Sequence[ChipState]) -> str:
    asked = (
        f"share_count={settings.share_count} (--share-count, ASCEND_DP_SHARE_COUNT, Helm settings.shareCount)"
    )
    why = "a chip split into vNPUs cannot also be shared (Huawei's plugin refuses this too)"
    if not split:  # vnpu=dynamic: the chips would be split on demand
        return (
            f"{asked} and vnpu=dynamic would both apply to chips {_chips(inventory, inventory.chips())}; "
            f"{why}. Set {how_to_set('share_count', 1)} or {how_to_set('vnpu', 'static')} on this node"
        )
    vnpus = ", ".join(f"{vnpu.vdev_id} ({vnpu.template})" for state in split for vnpu in state.vnpus or ())
    return (
        f"{asked} would share chips that carry vNPUs (vnpu={settings.vnpu}: vNPUs {vnpus} on "
        f"{_chips(inventory, split)}); {why}. Set {how_to_set('share_count', 1)} on this node, or destroy "
        "the vNPUs (npu-smi set -t destroy-vnpu)"
    )
