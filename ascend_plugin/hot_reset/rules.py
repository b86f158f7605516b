"""Which chips a hot reset is for: by the level of the chip's worst fault, as Huawei's plugin decides."""

from __future__ import annotations

import enum
from typing import Final

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import ChipState

# The levels whose remedy is a reset of the chip.
RESET_LEVELS: Final = frozenset(
    {FaultLevel.RestartRequest, FaultLevel.RestartBusiness, FaultLevel.FreeRestartNPU, FaultLevel.RestartNPU}
)
# The levels no reset may touch: the chip is separated, and an operator decides what happens to it.
SEPARATED_LEVELS: Final = frozenset({FaultLevel.SeparateNPU, FaultLevel.ManuallySeparateNPU})


class Remedy(enum.Enum):
    """What hot reset does about a chip."""

    NONE = (
        "none"  # healthy, not judged yet, or at a level no reset helps (PreSeparateNPU, SubHealthFault ...)
    )
    RESET = "reset"  # reset it once its group is free
    MANUAL = "manual"  # separated: name it in the ResetInfo annotation, never reset it


def remedy(state: ChipState) -> Remedy:
    """What hot reset does about ``state``'s chip, by its worst fault level (nothing before a verdict)."""
    return remedy_for(state.health.worst_level) if state.health.known else Remedy.NONE


def remedy_for(level: FaultLevel) -> Remedy:
    """What hot reset does about a chip whose worst fault has ``level``."""
    if level in SEPARATED_LEVELS:
        return Remedy.MANUAL
    if level in RESET_LEVELS:
        return Remedy.RESET
    return Remedy.NONE
