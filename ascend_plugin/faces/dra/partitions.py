"""A chip split on demand, as DRA's partitionable devices: a counter set, the whole chip, its partitions.

Each chip gets a counter set, ``npu-<phy>-counters``, holding what its vNPUs can
take: ``aicore`` and ``memory`` always, and where the family's templates use them
the AI CPUs and media engines (:mod:`backends.vnpu_split`). The whole chip is a
device that consumes all of it, and each template is a number of partition
devices, as many as the chip could hold of that template alone (at most
``dra_partition_places``), each consuming what one vNPU of it takes. The scheduler
then allocates any mix that fits (a vir04 beside two vir02 on a 310P, never the
whole chip beside either) and the driver makes the vNPU when the claim is prepared.

A partition carries its chip's attributes (so ``matchAttribute`` on the
topology unit and CEL on ``chipName`` work as for whole chips), its template's
AI cores as ``aiCores``, its memory as capacity, and Huawei's template name as
the string attribute ``vnpuTemplate``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ascend_plugin.faces.dra.names import (
    MAX_COUNTERS_PER_SET,
    checked_attribute_name,
    counter_set_name,
    partition_name,
)
from ascend_plugin.faces.dra.quantities import counter_value
from ascend_plugin.kubeapi.client import JsonObject
from backends.vnpu_split import ChipSplits, VnpuTemplate

TEMPLATE_ATTRIBUTE = "vnpuTemplate"


def counter_set(phy_id: int, splits: ChipSplits) -> JsonObject:
    """The chip's counter set: its totals."""
    assert len(splits.totals) <= MAX_COUNTERS_PER_SET  # a family counts a handful
    return {
        "name": counter_set_name(phy_id),
        "counters": {name: counter_value(name, amount) for name, amount in sorted(splits.totals.items())},
    }


def consumption(phy_id: int, takes: Mapping[str, int]) -> list[JsonObject]:
    """``consumesCounters`` of a device taking ``takes`` of its chip: one entry, its chip's set.

    Amounts of zero are left out (nothing to count); the API allows two
    entries a device, one set per entry.
    """
    return [
        {
            "counterSet": counter_set_name(phy_id),
            "counters": {
                name: counter_value(name, amount) for name, amount in sorted(takes.items()) if amount > 0
            },
        }
    ]


def partition_attributes(chip: Mapping[str, JsonObject], template: VnpuTemplate) -> dict[str, JsonObject]:
    """A partition's attributes: its chip's, with the template's AI cores and name."""
    attributes: dict[str, JsonObject] = {
        **chip,
        "aiCores": {"int": template.ai_cores},
        TEMPLATE_ATTRIBUTE: {"string": template.name},
    }
    checked_attribute_name(TEMPLATE_ATTRIBUTE)
    return attributes


def partition_names(phy_id: int, splits: ChipSplits) -> list[tuple[str, VnpuTemplate]]:
    """Every partition device of a chip, by template (smallest first), each as often as it is offered."""
    return [
        (partition_name(phy_id, template.name, index), template)
        for template in splits.templates
        for index in range(splits.offered(template))
    ]
