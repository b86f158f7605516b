"""Huawei's fault levels, their order of severity, and what each means for a chip's health.

The names are Huawei's (MindCluster's Ascend Device Plugin writes them into the
device-info ConfigMap, Volcano and ClusterD read them), and so is the order: a
larger value is more severe, so the final level of a chip is the ``max`` of
what its codes, its escalations and its stored reasons say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from types import MappingProxyType


class FaultLevel(IntEnum):
    """Huawei's fault levels, ordered so that a larger value is more severe."""

    NormalNPU = 0
    NotHandleFault = 1
    SubHealthFault = 2
    RestartRequest = 3
    RestartBusiness = 4
    FreeRestartNPU = 5
    RestartNPU = 6
    PreSeparateNPU = 7
    SeparateNPU = 8
    ManuallySeparateNPU = 9

    @property
    def healthy(self) -> bool:
        """Whether a chip whose worst fault has this level may take new pods (whoever holds it)."""
        return self <= FaultLevel.SubHealthFault

    @property
    def one_off_hold(self) -> float:
        """Seconds a one-off fault event (assertion 2) of this level keeps its code on a chip."""
        return ONE_OFF_HOLD_SECONDS[self]


# A one-off event reports something that happened, not a state that lasts, so the
# code is held for a while and then let go: longer for the levels that call for a
# reset or separation, not at all for the levels that stay healthy.
ONE_OFF_HOLD_SECONDS: Mapping[FaultLevel, float] = MappingProxyType(
    {
        FaultLevel.NormalNPU: 0.0,
        FaultLevel.NotHandleFault: 0.0,
        FaultLevel.SubHealthFault: 0.0,
        FaultLevel.RestartRequest: 60.0,
        FaultLevel.RestartBusiness: 60.0,
        FaultLevel.FreeRestartNPU: 60.0,
        FaultLevel.RestartNPU: 60.0,
        FaultLevel.PreSeparateNPU: 300.0,
        FaultLevel.SeparateNPU: 300.0,
        FaultLevel.ManuallySeparateNPU: 300.0,
    }
)


def most_severe(levels: Iterable[FaultLevel]) -> FaultLevel:
    """The most severe of ``levels``; NormalNPU when there are none."""
    return max(levels, default=FaultLevel.NormalNPU)


def kubelet_healthy(level: FaultLevel, *, held: bool) -> bool:
    """The health the kubelet is told for a chip whose final level is ``level``.

    Huawei's rule: NormalNPU, NotHandleFault and SubHealthFault are Healthy;
    PreSeparateNPU ("schedule nothing new, let the running job finish") is
    Healthy while a pod holds the chip, so the kubelet does not evict that pod,
    and Unhealthy once it is free; everything else is Unhealthy. (Huawei's
    legacy grace-tolerance mode also kept a held FreeRestartNPU chip Healthy;
    its current plugin never turns that mode on, and neither does this one.)
    """
    return level.healthy or (level is FaultLevel.PreSeparateNPU and held)


def network_healthy(level: FaultLevel) -> bool:
    """Huawei's network health: Healthy only at NormalNPU or NotHandleFault."""
    return level <= FaultLevel.NotHandleFault
