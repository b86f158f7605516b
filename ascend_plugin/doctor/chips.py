"""Checks of the chips through the library: dcmi_init, enumeration, family, AI-core figures.

The plugin's bring-up calls, with its per-call timeout (a wedged driver must not hang the doctor).
"""

from __future__ import annotations

from collections.abc import Sequence

from ascend_plugin.chip_calls import NODE, ChipCallError
from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide, how_to_set, listing, unmet
from ascend_plugin.inventory.discovery import open_library
from backends.chips import AiCoreFigure, Chip
from backends.errors import ChipError, UnknownChipFamily
from backends.families import FAMILY_NAMES, family_for, family_named
from backends.library import WITHOUT
from backends.session import LibrarySession

INIT = "dcmi-init"
CHIPS = "chips"
FAMILY = "chip-family"
AI_CORES = "ai-cores"

_DRIVER_FIX = (
    "`npu-smi info` on the host must list the NPUs first. On 310B boards DCMI also needs /etc/hdcBasic.cfg "
    "and the DMP daemon's files in the host's /dev/shm (see the host-file and dev-shm findings). "
    "docs/dcmi.md explains the DCMI codes"
)


def _open(context: Context) -> LibrarySession:
    """The chip library the settings select, not initialised yet."""
    settings = context.settings
    if settings.backend == "dcmi" and not context.library_loads:
        raise unmet("dcmi-library-loads")
    return LibrarySession(open_library(settings, context.library_path))


def _named(chips: Sequence[Chip]) -> str:
    return listing([chip.label for chip in chips])


@check(INIT)
async def dcmi_init(context: Context) -> Finding:
    """``dcmi_init`` answers 0; the driver version is read on the way."""
    try:
        session = _open(context)
    except ChipError as error:  # a fake scenario that cannot be read
        return Finding.problem(INIT, str(error), fix="fix the file named (docs/dcmi.md, fake scenarios)")
    try:
        missing = await context.calls.call(NODE, "dcmi_init", session.init)
        version = await context.calls.call(NODE, "driver_version", session.driver_version)
    except (ChipError, ChipCallError) as error:
        await context.release(session)
        return Finding.problem(INIT, f"dcmi_init on {session.description} failed: {error}", fix=_DRIVER_FIX)
    context.session = session
    lacks = "".join(f"; it has no {name}: {WITHOUT.get(name, 'done without')}" for name in sorted(missing))
    return Finding.ok(INIT, f"dcmi_init succeeded on {session.description}; driver {version}{lacks}")


@check(CHIPS)
async def chips(context: Context) -> Finding:
    """The chips enumerate (cards, NPUs per card, logic and physical ids, chip info)."""
    session = context.need(context.session, INIT)
    try:
        found = await context.calls.call(NODE, "enumerate chips", session.discover)
    except (ChipError, ChipCallError) as error:
        return Finding.problem(CHIPS, f"enumerating the chips failed: {error}", fix=_DRIVER_FIX)
    if not found:
        return Finding.problem(CHIPS, f"{session.description} reports no NPU chips", fix=_DRIVER_FIX)
    context.chips = found
    return Finding.ok(CHIPS, f"{len(found)} chip(s): {_named(context.chips)}")


@check(FAMILY)
async def chip_family(context: Context) -> Finding:
    """The family from the chip name (Huawei's order) or the chip_family setting, and its backend for the
    checks that ask what only the family knows (AI cores, vNPUs, sharing)."""
    forced = context.settings.chip_family
    if forced is not None:
        family = family_named(forced)
        context.family = family.TABLE
        if context.session is not None and context.chips:
            context.backend = family.for_chip(context.chips[0].info)(context.session, context.table)
        return Finding.ok(FAMILY, f"{forced}, forced by the chip_family setting")
    found = context.need(context.chips, CHIPS)
    session = context.need(context.session, INIT)
    first = found[0].info
    try:
        family = family_for(first)
    except UnknownChipFamily as error:
        return Finding.problem(
            FAMILY,
            str(error),
            fix=f"if the chip belongs to one of {', '.join(FAMILY_NAMES)}, "
            f"set {how_to_set('chip_family', '<family>')}",
        )
    context.family = family.TABLE
    table = context.table
    context.backend = family.for_chip(first)(session, table)
    others = sorted({chip.info.chip_name for chip in found if not family.claims(chip.info)})
    mixed = f"; chips of another family are served as {table.family} too: {', '.join(others)}"
    return Finding.ok(
        FAMILY,
        f"chip name {first.chip_name} -> family {table.family}, resource {table.resource_name}"
        + (mixed if others else ""),
    )


@check(AI_CORES)
async def ai_cores(context: Context) -> Finding:
    """Each chip's AI-core figure lies within the family's bounds (after the operator's overrides)."""
    found = context.need(context.chips, CHIPS)
    backend = context.need(context.backend, FAMILY)
    table = backend.table
    figures: list[tuple[Chip, AiCoreFigure]] = []
    for chip in found:
        try:
            figures.append((chip, await context.calls.call(chip.phy_id, "ai_cores", backend.ai_cores, chip)))
        except (ChipError, ChipCallError) as error:
            return Finding.problem(
                AI_CORES, f"cannot read the AI-core figure of {chip.label}: {error}", fix=_DRIVER_FIX
            )
    bounds = f"the {table.family} family's bounds [{table.ai_core_min:g}, {table.ai_core_max:g}]"
    low = [(chip, figure) for chip, figure in figures if figure.value < table.ai_core_min]
    high = [(chip, figure) for chip, figure in figures if figure.value > table.ai_core_max]
    if not low and not high:
        values = ", ".join(sorted({f"{figure.value:g} (from {figure.source})" for _, figure in figures}))
        return Finding.ok(AI_CORES, f"AI cores per chip: {values}, within {bounds}")
    details, fixes = [], []
    for setting, outside, pick in (("ai_core_min", low, min), ("ai_core_max", high, max)):
        if outside:
            values = ", ".join(sorted({f"{figure.value:g}" for _, figure in outside}))
            details.append(
                f"{_named([chip for chip, _ in outside])} report(s) {values} AI cores, outside {bounds}"
            )
            fixes.append(_bound_fix(context, setting, pick(figure.value for _, figure in outside)))
    return Finding.problem(
        AI_CORES,
        "; ".join(details) + ". The plugin serves these chips anyway, with a warning "
        "(Huawei's plugin exits here: 'invalid ai core num')",
        fix="; ".join(fixes),
        see=Guide.AI_CORES,
    )


def _bound_fix(context: Context, setting: str, value: float) -> str:
    """Set the bound to the figure; when the operator's own override is the cause, say so."""
    fix = f"if {value:g} is right for this hardware, set {how_to_set(setting, f'{value:g}')}"
    override = getattr(context.settings, setting)
    family = context.need(context.family, FAMILY)
    if override is not None:
        default = getattr(family, setting)
        fix += (
            f". {setting} is overridden to {override:g} here, but the {family.family} family's own "
            f"value is {default:g}: removing the override (and any copy of Huawei's global [8, 36]) may be "
            "all it takes"
        )
    return fix
