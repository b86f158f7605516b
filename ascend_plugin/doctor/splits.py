"""Checks of how the chips are split: static vNPUs, and the share_count setting.

Both decide with the plugin's own rules (:func:`~ascend_plugin.offers.node_offers.plan_offers`), so the
doctor refuses and warns where the plugin would. With ``vnpu=dynamic`` the vNPUs no prepared claim owns are
named (the driver destroys them at start); a checkpoint it cannot read is said, never taken for empty.
"""

from __future__ import annotations

from collections.abc import Mapping

from ascend_plugin.chip_calls import ChipCallError
from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.chips import CHIPS, FAMILY
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import DoctorError, Finding, NotApplicable, how_to_set, listing
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.offers.node_offers import (
    VNPU_TEMPLATES,
    OfferSettings,
    SharingRefused,
    plan_dra,
    plan_offers,
    vnpu_resource,
)
from backends.errors import ChipError
from backends.families import FamilyTable
from backends.library import VdevInfo

VNPUS = "vnpus"
SHARE_COUNT = "share-count"


def _described(table: FamilyTable, vnpus: Mapping[int, tuple[VdevInfo, ...]]) -> str:
    """``Ascend310P-0: 100 vir02 -> huawei.com/Ascend310P-2c, ...``, split chips only."""
    chips = []
    for phy, split in sorted(vnpus.items()):
        if split:
            named = ", ".join(
                f"{vnpu.vdev_id} {vnpu.template} -> "
                + (
                    vnpu_resource(table, VNPU_TEMPLATES[vnpu.template])
                    if vnpu.template in VNPU_TEMPLATES
                    else "?"
                )
                for vnpu in split
            )
            chips.append(f"{table.chip_id(phy)}: {named}")
    return listing(chips)


@check(VNPUS)
async def vnpus(context: Context) -> Finding:
    """Each chip's static vNPUs: known templates, and none on a node whose settings say there are none."""
    chips = context.need(context.chips, CHIPS)
    backend = context.need(context.backend, FAMILY)
    table = backend.table
    if absence := backend.vnpu_absence():
        raise NotApplicable(absence)
    found: dict[int, tuple[VdevInfo, ...]] = {}
    for chip in chips:
        try:
            found[chip.phy_id] = tuple(await context.calls.call(chip.phy_id, "vnpus", backend.vnpus, chip))
        except (ChipError, ChipCallError) as error:
            return Finding.problem(
                VNPUS,
                f"cannot read the vNPUs of {chip.label}: {error}; the plugin does not offer it healthy "
                "until it can",
                fix="`npu-smi info -t vnpu -i <card> -c <chip>` on the host should list them; docs/dcmi.md "
                "explains the DCMI codes",
            )
    context.vnpus = found
    split = {phy: vnpus for phy, vnpus in found.items() if vnpus}
    if not split:
        return Finding.ok(VNPUS, "no chip carries vNPUs: every chip is offered whole")
    described = _described(table, split)
    if context.settings.vnpu == "dynamic":
        return _dynamic(context, table, split)
    if context.settings.vnpu == "off":
        return Finding.problem(
            VNPUS,
            f"vnpu=off, but chips carry vNPUs ({described}): the plugin offers these chips whole, so a pod "
            "given one shares its silicon with the pods on its vNPUs",
            fix=f"set {how_to_set('vnpu', 'static')}, or destroy the vNPUs (npu-smi set -t destroy-vnpu)",
        )
    unknown = sorted({vnpu.template for vnpus in split.values() for vnpu in vnpus} - set(VNPU_TEMPLATES))
    if unknown:
        return Finding.warning(
            VNPUS,
            f"vNPUs of template(s) {', '.join(unknown)} have no resource name and are not offered "
            f"({described}); their chips are not offered whole either",
            fix=f"re-create them from a template the plugin offers: {', '.join(VNPU_TEMPLATES)}",
        )
    return Finding.ok(
        VNPUS, f"offered as resources of their own: {described}; these chips are not offered whole"
    )


def _dynamic(context: Context, table: FamilyTable, split: Mapping[int, tuple[VdevInfo, ...]]) -> Finding:
    """vnpu=dynamic: the vNPUs prepared claims own, and those the driver destroys when it starts."""
    try:
        owned = _owned(context)
    except DoctorError as unreadable:
        return Finding.warning(
            VNPUS,
            f"vnpu=dynamic: {unreadable}: which vNPUs claims own is unknown ({_described(table, split)})",
            fix="run doctor where the DRA driver's directory is mounted as in the plugin's pod "
            f"(the chart mounts it), or set {how_to_set('dra_plugin_path', '<directory>')}",
        )
    unowned = {phy: tuple(v for v in vnpus if (phy, v.vdev_id) not in owned) for phy, vnpus in split.items()}
    unowned = {phy: vnpus for phy, vnpus in unowned.items() if vnpus}
    if not unowned:
        return Finding.ok(
            VNPUS, f"vnpu=dynamic: every vNPU was made for a prepared claim ({_described(table, split)})"
        )
    return Finding.warning(
        VNPUS,
        f"vnpu=dynamic: vNPUs that no prepared claim of the DRA driver owns ({_described(table, unowned)}): "
        "the driver destroys them when it starts, as it does whatever it finds on a chip split on demand",
        fix=f"to keep vNPUs made with npu-smi, set {how_to_set('vnpu', 'static')} on this node",
    )


def _owned(context: Context) -> set[tuple[int, int]]:
    """(chip, vNPU id) of every prepared claim in the driver's checkpoint.

    None when the directory holds no checkpoint (a driver that never ran) or one
    that cannot be decoded (the driver moves it aside and starts without):
    either way the driver owns nothing when it starts. A directory that is not
    there (not mounted where doctor runs) or a file that cannot be read raises
    :class:`DoctorError`: the owners are unknown, not none.
    """
    from ascend_plugin.faces.dra.checkpoint import PREPARED, Checkpoint, CheckpointError
    from ascend_plugin.faces.dra.names import CHECKPOINT
    from ascend_plugin.settings import dra_plugin_dir

    path = context.host(str(dra_plugin_dir(context.settings) / CHECKPOINT))
    if not path.parent.is_dir():
        raise DoctorError(
            f"checkpoint {path} not readable (its directory {path.parent} is not there: not mounted here?)"
        )
    try:
        claims = Checkpoint(path).read()
    except (FileNotFoundError, CheckpointError):
        return set()
    except OSError as error:
        raise DoctorError(f"checkpoint {path} not readable ({error.strerror or error})") from error
    return {
        (vnpu.phy_id, vnpu.vdev_id)
        for claim in claims.values()
        if claim.state == PREPARED
        for vnpu in claim.vnpus
        if vnpu.vdev_id is not None
    }


@check(SHARE_COUNT)
async def share_count(context: Context) -> Finding:
    """share_count works on this node: a family that shares, no chip split into vNPUs."""
    settings = context.settings
    if settings.share_count == 1:
        return Finding.ok(SHARE_COUNT, "share_count=1: chips are not shared")
    chips = context.need(context.chips, CHIPS)
    backend = context.need(context.backend, FAMILY)
    vnpus: Mapping[int, tuple[VdevInfo, ...]] = {}
    if settings.vnpu == "static" and not backend.vnpu_absence():
        vnpus = context.need(context.vnpus, VNPUS)  # what the plugin would see
    states = [ChipState(chip, vnpus=vnpus.get(chip.phy_id, ())) for chip in chips]
    inventory = Inventory(NodeFacts(backend.table, "doctor"), states)
    try:
        if settings.serve == "dra":
            plan_dra(OfferSettings.from_settings(settings), inventory, backend)  # its refusal, if any
        plan = plan_offers(OfferSettings.from_settings(settings), inventory, backend)
    except SharingRefused as refused:
        return Finding.problem(
            SHARE_COUNT,
            f"{refused}. The plugin exits with code 2",
            fix=f"set {how_to_set('share_count', 1)} on this node, or destroy the vNPUs",
        )
    if not plan.sharing:
        (ignored,) = plan.warnings
        return Finding.warning(
            SHARE_COUNT,
            ignored.message,
            fix=f"nothing breaks; to silence it, set {how_to_set('share_count', 1)} for this node",
        )
    return Finding.ok(SHARE_COUNT, " ".join(notice.message for notice in plan.notices))
