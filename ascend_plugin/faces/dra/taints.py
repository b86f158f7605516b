"""Device taints for unhealthy chips, where the cluster has ``DRADeviceTaints``.

A tainted device stays in the ResourceSlice, so the scheduler sees it and
skips it (``NoSchedule``), and with ``NoExecute`` the cluster also evicts the
pods that hold it. Which effect a chip gets is data, by the level of its worst
fault: the levels whose remedy is a reset or a separation of the chip, where a
running job cannot go on, evict; every other reason to keep new pods away
(a reset when idle, a job or request to retry, a chip that is hung, fails its
health query or reports a bad health value without a code) only blocks
scheduling. With ``dra_taint_effect=NoSchedule`` no taint evicts: every one
only keeps new pods away.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import ChipState
from ascend_plugin.kubeapi.client import JsonObject
from ascend_plugin.offers.base import chip_health

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
TAINT_KEY: Final = "unhealthy"  # in the driver's domain: npu.huawei.com/unhealthy
NO_FAULT_CODE: Final = "Unhealthy"  # the taint's value when no fault code explains the verdict

TAINT_EFFECTS: Mapping[FaultLevel, str] = MappingProxyType(
    {
        FaultLevel.RestartRequest: NO_SCHEDULE,
        FaultLevel.RestartBusiness: NO_SCHEDULE,
        FaultLevel.FreeRestartNPU: NO_SCHEDULE,  # reset once idle: the running job may finish
        FaultLevel.RestartNPU: NO_EXECUTE,
        FaultLevel.PreSeparateNPU: NO_SCHEDULE,  # separate after the running job
        FaultLevel.SeparateNPU: NO_EXECUTE,
        FaultLevel.ManuallySeparateNPU: NO_EXECUTE,
    }
)


def taint_of(state: ChipState, driver: str, *, evict: bool = True) -> JsonObject | None:
    """The taint of an unhealthy chip: ``<driver>/unhealthy``, its worst level as value; None if healthy.

    ``evict`` False: ``NoSchedule`` whatever the level.
    """
    if chip_health([state])[0]:
        return None
    level = state.health.worst_level
    effect = TAINT_EFFECTS.get(level, NO_SCHEDULE) if evict else NO_SCHEDULE
    value = level.name if level in TAINT_EFFECTS else NO_FAULT_CODE
    return {"key": f"{driver}/{TAINT_KEY}", "value": value, "effect": effect}
