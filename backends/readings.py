"""What a chip's telemetry reads come back as: figures in an operator's units, None where unknown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# npu-exporter does not show a value of -1 or 2**32 - 1: DCMI's "no value".
NO_VALUES: Final = frozenset({-1, 0xFFFFFFFF})
# dcmi_get_device_temperature: below this the sensor failed.
MIN_TEMPERATURE: Final = -275


def valid(value: int | None) -> int | None:
    """``value``, or None when DCMI means "no value" by it."""
    return None if value is None or value in NO_VALUES else value


@dataclass(frozen=True)
class Utilization:
    """How busy the chip is, in percent; each None where the driver does not say."""

    aicore: int | None = None  # npu_chip_info_utilization
    vector: int | None = None  # npu_chip_info_vector_utilization
    cube: int | None = None  # npu_chip_info_cube_utilization (910B, A3)
    overall: int | None = None  # npu_chip_info_overall_utilization (910B, A3)


@dataclass(frozen=True)
class MemoryUsage:
    """The chip's device memory in MB: HBM on the 910 families, DDR elsewhere, and HBM's own figures."""

    hbm: bool
    total_mb: int
    used_mb: int
    utilization: int | None = None  # HBM: dcmi_get_device_utilization_rate type 6
    temperature_c: int | None = None  # HBM: dcmi_hbm_info.temp
    bandwidth_utilization: int | None = None  # HBM: dcmi_hbm_info.bandwith_util_rate


# dcmi_get_device_network_health: npu-exporter's npu_chip_info_network_status.
NETWORK_UP: Final = 1  # OK or INIT
NETWORK_DOWN: Final = 0  # any other result
NETWORK_UNKNOWN: Final = -1  # the call failed
