"""Static vNPUs: every vNPU an operator carved out of a chip, as a device of its template's resource.

Huawei's ``presetVirtualDevice``: the vNPUs the driver lists, re-read every poll, each under its template's
resource (``huawei.com/Ascend310P-2c``; ``<N>c`` AI cores, ``.<N>cpu`` AI CPUs, ``.<N>g`` memory, ``.dvpp``
/ ``.ndvpp`` with or without media), ID ``Ascend310P-2c-100-0`` (template, vNPU id, chip). A container gets
``/dev/vdavinci<vdev>`` as ``/dev/davinci<vdev>``; health, unit and NUMA node are its chip's. A template
outside the table is not offered (said once).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.offers.base import DeviceNode, IdForm, OfferedDevice, chip_health
from backends.families import FamilyTable
from backends.library import VdevInfo

log = logging.getLogger(__name__)

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
