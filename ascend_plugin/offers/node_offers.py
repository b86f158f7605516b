"""The node's offers, chosen once at start from the settings and the chips found.

One place decides how this node's chips are offered, so the plugin and
``doctor`` come to the same answer:

* whole chips, or, with ``share_count`` N > 1 on a family whose driver shares
  chips (its backend's ``shares_chips``: 310B, 310P), each chip N times
  (:class:`~ascend_plugin.offers.shares.Shares`);
  on other families the setting is ignored, as Huawei's plugin does, so that one
  chart value across a mixed cluster never takes chips away: the chips are offered
  whole and a warning :class:`Notice` says so (logged, posted as a node Event,
  reported by ``doctor``);
* with ``vnpu=static`` on a family whose chips can be split (``splits_into_vnpus``:
  310P, 910), the static vNPUs
  (:class:`~ascend_plugin.offers.vnpus.StaticVnpus`); a chip that carries some is
  then neither offered whole nor shared.

Sharing a chip that carries vNPUs is refused (:class:`SharingRefused`, a
settings error: the plugin stops as it would for invalid settings), as Huawei's
plugin refuses it. The plugin cannot
see whether the driver's device-share mode is on (Huawei does not ask either), so
sharing comes with an informational notice giving the ``npu-smi`` command per chip.

The DRA driver's counterpart is :func:`plan_dra`: which chips are shared and
which can be split on demand (``vnpu=dynamic``), by the same rules.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import Offer
from ascend_plugin.offers.shares import Shares
from ascend_plugin.offers.vnpus import StaticVnpus
from ascend_plugin.offers.whole_chips import WholeChips
from ascend_plugin.settings import Settings, SettingsError, how_to_set
from backends.backend import ChipBackend
from backends.families import FAMILIES
from backends.vnpu_family import VnpuFamily
from backends.vnpu_split import ChipSplits

SHARE_COUNT_IGNORED = "ShareCountIgnored"
DYNAMIC_VNPU_IGNORED = "DynamicVnpuIgnored"
_MAKING = frozenset({"dcmi_create_vdevice", "dcmi_set_destroy_vdevice"})
NOT_SPLIT_ON_DEMAND = "NotSplitOnDemand"
DEVICE_SHARE_NEEDED = "DeviceShareNeeded"
_LISTED = 8  # chips named in one message


@dataclass(frozen=True)
class OfferSettings:
    """The settings that choose the offers."""

    share_count: int = 1
    vnpu: Literal["static", "dynamic", "off"] = "static"
    partition_places: int = 0  # vnpu=dynamic: partitions of each template a chip offers (0: all that fit)

    @classmethod
    def from_settings(cls, settings: Settings) -> OfferSettings:
        return cls(settings.share_count, settings.vnpu, settings.dra_partition_places)


@dataclass(frozen=True)
class Notice:
    """Something about the node's offers an operator should hear of once, at start.

    ``level`` is the log level; warnings are also posted as an Event on the node
    (``reason`` is the Event's reason) and reported by ``doctor``.
    """

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
        """The notices worth a node Event."""
        return tuple(notice for notice in self.notices if notice.level >= logging.WARNING)


class SharingRefused(SettingsError):
    """share_count asks to share chips that carry vNPUs; the message names both settings and the chips."""


def plan_offers(settings: OfferSettings, inventory: Inventory, family: ChipBackend) -> OfferPlan:
    """The node's offers, as ``family`` (the node's backend) allows; SharingRefused: shares meet vNPUs."""
    chips = inventory.chips()
    notices: list[Notice] = []
    sharing = settings.share_count > 1 and family.shares_chips
    if settings.share_count > 1 and not family.shares_chips:
        notices.append(_share_count_ignored(settings.share_count, inventory))
    offers: list[Offer] = []
    if sharing:
        split = [state for state in chips if state.split]
        if split:
            raise SharingRefused(_sharing_refused(settings, inventory, split))
        offers.append(Shares(settings.share_count))
        notices.append(_device_share_needed(settings.share_count, chips))
    else:
        offers.append(WholeChips())
    if settings.vnpu == "static" and family.splits_into_vnpus:
        offers.append(StaticVnpus())
    return OfferPlan(tuple(offers), tuple(notices), sharing)


@dataclass(frozen=True)
class DraPlan:
    """What the DRA driver publishes besides whole chips: partitions of the chips that split, shares."""

    splits: Mapping[int, ChipSplits]
    share_count: int = 1
    notices: tuple[Notice, ...] = ()
    maker: VnpuFamily | None = None  # the backend that makes the partitions' vNPUs (splits not empty)

    @property
    def warnings(self) -> tuple[Notice, ...]:
        """The notices worth a node Event."""
        return tuple(notice for notice in self.notices if notice.level >= logging.WARNING)


def plan_dra(settings: OfferSettings, inventory: Inventory, family: ChipBackend) -> DraPlan:
    """The DRA driver's plan for the node; SharingRefused when sharing meets vNPUs, as in :func:`plan_offers`.

    ``vnpu=dynamic`` on a family whose chips cannot be split, or ``share_count``
    on one whose driver does not share chips, is ignored with a warning (one
    chart value across a mixed cluster). On a family that could do both (310P)
    the two do not go together: a chip split into vNPUs cannot also be shared.
    """
    chips = inventory.chips()
    notices: list[Notice] = []
    sharing = settings.share_count > 1 and family.shares_chips
    if settings.share_count > 1 and not family.shares_chips:
        notices.append(_share_count_ignored(settings.share_count, inventory))
    maker = family if isinstance(family, VnpuFamily) else None
    dynamic = settings.vnpu == "dynamic" and maker is not None
    if settings.vnpu == "dynamic" and maker is None:
        notices.append(_dynamic_ignored(inventory, family))
    lacking = sorted(_MAKING & family.missing)
    if dynamic and lacking:
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
    return DraPlan(splits, settings.share_count if sharing else 1, tuple(notices), maker if splits else None)


def _driver_cannot_make(inventory: Inventory, lacking: Sequence[str]) -> Notice:
    return Notice(
        DYNAMIC_VNPU_IGNORED,
        f"vnpu=dynamic: the chip library {inventory.facts.library} has no {' or '.join(lacking)}, so no "
        "vNPU can be made on demand; the chips are published whole. A driver whose npu-smi makes vNPUs "
        "(npu-smi set -t create-vnpu) has them",
    )


def _dynamic_ignored(inventory: Inventory, backend: ChipBackend) -> Notice:
    splitting = ", ".join(family.TABLE.family for family in FAMILIES if family.splits_into_vnpus)
    return Notice(
        DYNAMIC_VNPU_IGNORED,
        f"vnpu=dynamic is ignored on this node: its chips {_chips(inventory, inventory.chips())} are of "
        f"family {inventory.table.family}: {backend.vnpu_absence()}; only {splitting} have vNPUs. The "
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


def sharing_families() -> str:
    """The families whose driver shares chips, e.g. ``310P, 310B``."""
    return ", ".join(family.TABLE.family for family in FAMILIES if family.shares_chips)


def _chips(inventory: Inventory, states: Sequence[ChipState]) -> str:
    names = [inventory.table.chip_id(state.phy_id) for state in states]
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    kinds = ", ".join(sorted({state.chip.info.chip_name for state in states}))
    return f"{', '.join(names[:_LISTED])}{more} ({kinds})"


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
    if not split:  # vnpu=dynamic: the chips would be split on demand
        return (
            f"share_count={settings.share_count} (--share-count, ASCEND_DP_SHARE_COUNT, Helm "
            f"settings.shareCount) and vnpu=dynamic would both apply to chips "
            f"{_chips(inventory, inventory.chips())}; a chip split into vNPUs cannot also be shared "
            f"(Huawei's plugin refuses this too). Set {how_to_set('share_count', 1)} or "
            f"{how_to_set('vnpu', 'static')} on this node"
        )
    vnpus = ", ".join(f"{vnpu.vdev_id} ({vnpu.template})" for state in split for vnpu in state.vnpus or ())
    return (
        f"share_count={settings.share_count} (--share-count, ASCEND_DP_SHARE_COUNT, Helm "
        f"settings.shareCount) would share chips that carry vNPUs (vnpu={settings.vnpu}: vNPUs "
        f"{vnpus} on {_chips(inventory, split)}); a chip split into vNPUs cannot also be shared "
        f"(Huawei's plugin refuses this too). Set {how_to_set('share_count', 1)} on this node, or "
        f"destroy the vNPUs (npu-smi set -t destroy-vnpu)"
    )
