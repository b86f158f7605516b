"""The vNPU templates offered, and the resource suffix each becomes: Huawei's table, which clusters request.

``GetTemplateName2DeviceTypeMap`` of Huawei's device plugin: ``<N>c`` AI cores,
``.<N>cpu`` AI CPUs, ``.<N>g`` memory, ``.dvpp`` / ``.ndvpp`` with or without the
media engines. A template outside it is not offered (a warning names it once).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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
