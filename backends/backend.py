"""ChipBackend: the one face through which the plugin reaches chips.

Whatever library plays the chips (Huawei's libdcmi.so through cffi, or the
scenario-driven fake), the plugin asks the same six things: open it
(:meth:`init`), find the chips (:meth:`discover`), read one chip's health
(:meth:`read_health`) and its static vNPUs (:meth:`vnpus`), hear of faults as
they happen (:meth:`subscribe_faults`), and let go (:meth:`close`), plus what a
chip reports of itself (AI cores, device memory, PCIe and RoCE addresses).
Family rules are data (:mod:`backends.families`), not subclasses.

Drivers differ in what they offer: an older libdcmi.so has no
``dcmi_get_device_errorcode_v2``, and only 910 drivers deliver fault events.
A missing function is never fatal here: health then comes from the health
value alone, and the first time a function turns out missing it is recorded
in :attr:`missing` so the caller can say so once.
A driver without VDEV_MNG, or a chip that answers "not supported", simply has
no vNPUs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from backends.chips import CARD_DROPPED_CODE, AiCoreFigure, Chip, HealthReading, enumerate_chips
from backends.errors import NOT_READY, NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.library import (
    FEATURE_FUNCTIONS,
    HEALTH_ABSENT,
    DeviceLibrary,
    FaultHandler,
    MemoryInfo,
    PcieAddress,
    VdevInfo,
)

log = logging.getLogger(__name__)

ERROR_CODES = "dcmi_get_device_errorcode_v2"
SUBSCRIBE = "dcmi_subscribe_fault_event"
PCIE_INFO = "dcmi_get_device_pcie_info_v2"
HBM_INFO = "dcmi_get_device_hbm_info"
MEMORY_INFO = "dcmi_get_device_memory_info_v3"
DEVICE_IP = "dcmi_get_device_ip"
DEVICE_INFO = "dcmi_get_device_info"  # VDEV_MNG: AI cores and static vNPUs

# What the plugin does without each optional DCMI function (said once, at init).
WITHOUT: Mapping[str, str] = MappingProxyType(
    {
        ERROR_CODES: "health comes from dcmi_get_device_health alone (fault codes are not polled; "
        "fault events still count)",
        SUBSCRIBE: "no fault events: health comes from polling alone",
        PCIE_INFO: "no NUMA nodes: placement and the Topology Manager get no NUMA preference",
        DEVICE_IP: "device IPs are unknown (Volcano's rank table says -1)",
        "dcmi_get_device_info": "AI cores come from chip info or the family nominal figure; no vNPU is seen",
        HBM_INFO: "device memory comes from dcmi_get_device_memory_info_v3 (the DRA memory capacity)",
        MEMORY_INFO: "device memory comes from dcmi_get_device_hbm_info alone (the DRA memory capacity)",
        **FEATURE_FUNCTIONS,
    }
)


class ChipBackend:
    """One chip library, as the plugin uses it. Synchronous: callers run it off the event loop."""

    def __init__(self, library: DeviceLibrary) -> None:
        self.library = library
        self.missing: set[str] = set()  # optional DCMI functions found missing
        self._without_vnpus: set[int] = set()  # chips whose driver answered "not supported" for vNPUs

    @property
    def description(self) -> str:
        """Where the chips come from (a library path, or a fake's scenario file)."""
        return self.library.description

    def init(self) -> frozenset[str]:
        """Open the library and ``dcmi_init`` it; return the optional functions it lacks."""
        self.library.init()
        missing = self.library.missing_functions()
        self.missing.update(missing)
        return missing

    def close(self) -> None:
        """Release the library."""
        self.library.close()

    def discover(self) -> list[Chip]:
        """Every NPU chip of the node, ordered by physical id."""
        return sorted(enumerate_chips(self.library), key=lambda chip: chip.phy_id)

    def read_health(self, chip: Chip) -> HealthReading:
        """Poll one chip: health value plus current fault codes.

        A health call answering "not ready" (-8012) means the card dropped off
        the bus; it is reported as absent with the synthetic card-drop code.
        Without ``dcmi_get_device_errorcode_v2`` the reading carries the health
        value only, marked as such.
        """
        try:
            value = self.library.health(chip.card_id, chip.device_id)
        except DcmiError as error:
            if error.code == NOT_READY:
                return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
            raise
        if value == HEALTH_ABSENT:
            return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
        if ERROR_CODES in self.missing:
            return HealthReading(value, (), codes_known=False)
        try:
            codes = tuple(self.library.error_codes(chip.card_id, chip.device_id))
        except SymbolMissing:
            self.missing.add(ERROR_CODES)
            return HealthReading(value, (), codes_known=False)
        return HealthReading(value, codes)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        """Deliver every chip's fault events to ``handler`` (on a library thread)."""
        try:
            self.library.subscribe_faults(handler)
        except SymbolMissing:
            self.missing.add(SUBSCRIBE)
            raise

    def pcie_address(self, chip: Chip) -> PcieAddress | None:
        """Where the chip sits on PCI; None where the driver does not say (SoC boards, old drivers)."""
        if PCIE_INFO in self.missing:
            return None
        try:
            return self.library.pcie_address(chip.card_id, chip.device_id)
        except SymbolMissing:
            self.missing.add(PCIE_INFO)
        except DcmiError:
            pass
        return None

    def memory(self, chip: Chip) -> MemoryInfo | None:
        """The chip's device memory: HBM where the chip has it (910), else its DDR; None when neither answers.

        ``dcmi_get_device_hbm_info`` is asked first because 910B and A3 drivers
        refuse ``dcmi_get_device_memory_info_v3`` (-8255); a chip without HBM
        answers the HBM query with an error or a total of 0, and its DDR figure
        comes from the other call. A missing function is recorded once.
        """
        for function, read in ((HBM_INFO, self.library.hbm_info), (MEMORY_INFO, self.library.memory_info)):
            if function in self.missing:
                continue
            try:
                info = read(chip.card_id, chip.device_id)
            except SymbolMissing:
                self.missing.add(function)
                continue
            except DcmiError:
                continue
            if info.total_mb > 0:
                return info
        return None

    def device_ip(self, chip: Chip) -> str | None:
        """The chip's RoCE address (IPv4, else IPv6); None where the driver has none or no such function."""
        if DEVICE_IP in self.missing:
            return None
        try:
            return self.library.device_ip(chip.card_id, chip.device_id)
        except SymbolMissing:
            self.missing.add(DEVICE_IP)
        except DcmiError:
            pass
        return None

    def ai_cores(self, chip: Chip, nominal: float) -> AiCoreFigure:
        """The chip's AI-core count: VDEV_MNG total resource, else chip info, else ``nominal``."""
        try:
            aic = self.library.total_aicore(chip.card_id, chip.device_id)
        except (DcmiError, SymbolMissing):
            aic = 0.0
        if aic > 0:
            return AiCoreFigure(aic, "vdev_total_resource")
        if chip.info.aicore_cnt > 0:
            return AiCoreFigure(float(chip.info.aicore_cnt), "chip_info")
        return AiCoreFigure(nominal, "family_nominal")

    def vnpus(self, chip: Chip) -> list[VdevInfo]:
        """The chip's static vNPUs by id; empty where the driver or the chip has none.

        One VDEV_MNG query lists the ids and one more describes each: every read
        describes every vNPU afresh, since a vNPU destroyed and re-created (the
        driver hands the freed id out again) may carry another template under the
        same id. Any other failure is raised: a vNPU that cannot be described is
        not taken for absent. A driver without ``dcmi_get_device_info``, or a chip
        that answers "not supported", has no vNPUs: said once per chip at debug
        level, and not asked again.
        """
        if DEVICE_INFO in self.missing or chip.phy_id in self._without_vnpus:
            return []
        try:
            ids = self.library.vdev_ids(chip.card_id, chip.device_id)
        except SymbolMissing:
            self.missing.add(DEVICE_INFO)
            return self._no_vnpus(chip, f"the driver has no {DEVICE_INFO}")
        except DcmiError as error:
            if error.code != NOT_SUPPORTED:
                raise
            return self._no_vnpus(chip, f"{error.function} answers {error.code} (not supported) for VDEV_MNG")
        return [self.library.vdev_info(chip.card_id, chip.device_id, vdev_id) for vdev_id in sorted(set(ids))]

    def _no_vnpus(self, chip: Chip, why: str) -> list[VdevInfo]:
        self._without_vnpus.add(chip.phy_id)
        log.debug("%s has no static vNPUs: %s", chip.label, why, extra={"chip": chip.phy_id})
        return []
