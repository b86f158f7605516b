"""Hot reset: is it on, can the driver do it, and what would it do about the chips as they are now.

The same rules as the plugin's (:mod:`ascend_plugin.hot_reset`); which chips pods hold the doctor cannot
ask for the plugin, but a missing PodResources socket (every group busy) it can tell.
"""

from __future__ import annotations

import os
import stat

from ascend_plugin.chip_calls import ChipCallError
from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.chips import CHIPS, FAMILY
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, NotApplicable, how_to_set, listing
from ascend_plugin.fault_policy.config import base_config, fault_config
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.hot_reset.freeness import GroupCheck
from ascend_plugin.hot_reset.rules import Remedy, remedy_for
from ascend_plugin.settings import SettingsError
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError
from backends.library import WITHOUT

HOT_RESET = "hot-reset"
NEEDED = ("dcmi_set_device_reset", "dcmi_get_device_boot_status")
PROCESSES = "dcmi_get_device_resource_info"


def pod_resources_missing(context: Context) -> str | None:
    """What is wrong with the kubelet's PodResources socket as the plugin would dial it, if anything.

    A symlink counts as wrong: the plugin refuses one (:mod:`ascend_plugin.holdings.pod_resources`).
    """
    path = context.host(str(context.settings.pod_resources_socket))
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as error:
        return f"{path} cannot be looked at ({error.strerror})"
    if stat.S_ISLNK(mode):
        return f"{path} is a symlink, which the plugin refuses"
    if not stat.S_ISSOCK(mode):
        return f"{path} is not a socket"
    return None


@check(HOT_RESET)
async def hot_reset(context: Context) -> Finding:
    """Whether hot reset is on, whether the driver can do it, and what it would do now."""
    chips = context.need(context.chips, CHIPS)
    backend = context.need(context.backend, FAMILY)
    settings = context.settings
    try:
        levels = await _levels(context, backend, chips)
    except SettingsError as error:  # a fault_levels_file the plugin would refuse: fault-config says why
        raise NotApplicable(f"not checked: the fault levels cannot be read ({error})") from error
    wanted = {chip.phy_id: remedy_for(level) for chip, level in levels}
    names = {chip.phy_id: f"{backend.table.chip_id(chip.phy_id)} ({level.name})" for chip, level in levels}
    to_reset = [names[phy] for phy, remedy in wanted.items() if remedy is Remedy.RESET]
    separated = [names[phy] for phy, remedy in wanted.items() if remedy is Remedy.MANUAL]
    if not settings.hot_reset:
        now = f"; at a reset level now: {listing(to_reset)}" if to_reset else ""
        return Finding.ok(
            HOT_RESET,
            "hot reset is off: a chip at RestartRequest, RestartBusiness, FreeRestartNPU or RestartNPU stays "
            f"out until it is reset by hand ({how_to_set('hot_reset', True)} turns it on){now}",
        )
    lacking = backend.lacking(*NEEDED)
    if lacking:
        return Finding.problem(
            HOT_RESET,
            f"hot reset is on, but the driver has no {', '.join(lacking)}: "
            + "; ".join(WITHOUT[name] for name in lacking),
            fix="install a driver whose libdcmi.so has these functions, or turn hot reset off",
        )
    plans = [
        await _plan(context, backend, chips, chip)
        for chip, _ in levels
        if wanted[chip.phy_id] is Remedy.RESET
    ]
    detail = f"hot reset is on (idle {settings.hot_reset_idle:g} s)"
    detail += ": " + "; ".join(plans) if plans else ": no chip needs a reset now"
    if separated:
        detail += f"; named in the node's ResetInfo annotation, never reset: {listing(separated)}"
    if backend.lacking(PROCESSES):
        return Finding.warning(
            HOT_RESET,
            f"{detail}. The driver has no {PROCESSES}: {WITHOUT[PROCESSES]}",
            fix="install a driver whose libdcmi.so lists processes, or turn hot reset off",
        )
    if (missing := pod_resources_missing(context)) is not None:
        return Finding.warning(
            HOT_RESET,
            f"{detail}. The kubelet's PodResources socket {missing}: until the kubelet's PodResources "
            "answers, every reset group counts as busy",
            fix="mount the kubelet's pod-resources directory (the chart does) and point "
            f"{how_to_set('pod_resources_socket', '<socket>')} at the socket itself: docs/hot-reset.md",
        )
    return Finding.ok(HOT_RESET, detail)


async def _levels(context: Context, backend: ChipBackend, chips: list[Chip]) -> list[tuple[Chip, FaultLevel]]:
    """Each chip's fault level as its codes say now (NormalNPU where they cannot be read)."""
    policy = FaultPolicy(fault_config(base_config(context.settings.fault_levels_file), None))
    found = []
    for chip in chips:
        try:
            reading = await context.calls.call(chip.phy_id, "read_health", backend.read_health, chip)
        except (ChipError, ChipCallError):
            found.append((chip, FaultLevel.NormalNPU))
            continue
        policy.reconcile(chip.phy_id, reading.codes)
        found.append((chip, policy.judge(chip.phy_id).level))
    return found


async def _plan(context: Context, backend: ChipBackend, chips: list[Chip], chip: Chip) -> str:
    """What the plugin would do about one chip that needs a reset: reset it once free, or wait for whom."""
    name = backend.table.chip_id(chip.phy_id)
    try:
        group = await context.calls.call(chip.phy_id, "reset_group", backend.reset_group, chip, chips)
    except (ChipError, ChipCallError) as error:
        return f"{name}: its reset group cannot be read ({error})"
    check = GroupCheck(None, backend, context.calls)
    busy = [found for member in group if (found := await check.processes(member)) is not None]
    members = listing([backend.table.chip_id(member.phy_id) for member in group])
    if busy:
        why = "; ".join(f"{backend.table.chip_id(each.phy_id)} {each.why}" for each in busy)
        return f"{name} waits for its reset group ({members}): {why}"
    return f"{name} would be reset with its reset group ({members}) once no pod holds them for the idle time"
