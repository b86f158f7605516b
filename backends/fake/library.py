"""FakeLibrary: a DeviceLibrary that plays a scenario file (docs/fake-backend.md).

The file is re-read whenever it changes, so a fault can be injected into a running plugin by editing it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Final, TypeVar, cast

from backends.errors import (
    INVALID_PARAMETER,
    NOT_INITIALISED,
    NOT_READY,
    NOT_SUPPORTED,
    DcmiError,
    SymbolMissing,
)
from backends.fake.driver import FakeDriver, reset_group
from backends.fake.library_v2 import FakeV2Library
from backends.fake.scenario import (
    ANSWERED_WHILE_RESETTING,
    DCMI_FUNCTIONS,
    FakeScenario,
    Operation,
    PlacedChip,
    ScenarioError,
    load_scenario,
)
from backends.fake.telemetry import EccKind
from backends.library import (
    OPTIONAL_FUNCTIONS,
    V2_NAMES,
    ChipInfo,
    CreatedVdev,
    DdrInfo,
    DeviceLibraryV2,
    DieId,
    DieType,
    EccDeviceType,
    EccInfo,
    FaultEvent,
    FaultHandler,
    FrequencyType,
    HbmInfo,
    MultiUtilization,
    PcieAddress,
    Power,
    ProcessMemory,
    ResetChannel,
    SuperPodInfo,
    UtilizationType,
    VdevActivity,
    VdevInfo,
    Voltage,
    template_name_bytes,
    v2_name,
)

log = logging.getLogger(__name__)

# dcmi_get_device_ip on a chip whose RoCE port has no address: "configuration does not exist".
NO_ADDRESS: Final = -8023

_POLL_SECONDS: Final = 0.01
# dcmi_get_netdev_brother_device: A3 cards 0-3 pair with 4-7, devices 0 and 1 (the driver's table).
_BROTHER_OFFSET: Final = 4
_BROTHER_CARDS: Final = 8
_BROTHER_DEVICES: Final = 2
_AFFINITY_CHARACTERS: Final = 31  # dcmi_get_affinity_cpu_info_by_device_id: the driver keeps no more
_PERIODS: Final = range(1, 5)  # dcmi_get_device_multi_utilization_rate_period: seconds
STORM_BATCH: Final = 1000  # events of one chip's storm delivered at most per look (every _POLL_SECONDS)
T = TypeVar("T")
E = TypeVar("E", bound=IntEnum)
# Which chip a call is about, looked up in the scenario in force at each step.
Target = Callable[[FakeScenario], PlacedChip | None]
_Reader = Callable[[FakeScenario, PlacedChip], T]


def _at(card_id: int, device_id: int) -> Target:
    return lambda scenario: scenario.by_address.get((card_id, device_id))


def _with_logic_id(logic_id: int) -> Target:
    return lambda scenario: next((p for p in scenario.placed if p.logic_id == logic_id), None)


def _node(_: FakeScenario) -> PlacedChip | None:
    return None


def _first_on_card(card_id: int) -> Target:
    return lambda scenario: next((p for p in scenario.placed if p.card_id == card_id), None)


def _kind(function: str, enum: type[E], value: int) -> E:
    """``value`` as a member of the DCMI enum ``enum``; an unknown value is -8001, as the driver says."""
    try:
        return enum(value)
    except ValueError:
        raise DcmiError(function, INVALID_PARAMETER) from None


@dataclass
class _StormRun:
    """How far a chip's storm has got."""

    serial: int
    started: float  # time.monotonic()
    sent: int = 0


class FakeLibrary:
    """A DeviceLibrary over a scenario file."""

    def __init__(self, path: Path, *, poll_seconds: float = _POLL_SECONDS) -> None:
        self.path = path
        self._poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int, int] | None = None
        self._scenario = load_scenario(path)
        self._stamp = self._file_stamp()
        self._initialised = False
        # The functions the "loaded driver" lacks (v1 names): fixed at init, as symbols are once it is open.
        self._lacking: frozenset[str] | None = None
        self._v2 = False  # dcmiv2_init succeeded: the library speaks DCMI v2 (a 950 node)
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        # (logic id, serial) of the scenario events delivered: each once for the life of the library.
        self._delivered: set[tuple[int, int]] = set()
        self._driver = FakeDriver(path)
        # logic id -> the storm it plays (or played last).
        self._storms: dict[int, _StormRun] = {}

    @property
    def description(self) -> str:
        return f"fake DCMI library playing {self.path}"

    # -- scenario handling -----------------------------------------------------

    def _file_stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def scenario(self) -> FakeScenario:
        """The scenario in force, re-read first if the file changed."""
        with self._lock:
            stamp = self._file_stamp()
            if stamp is not None and stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._scenario = load_scenario(self.path)
                    log.info("fake scenario reloaded", extra={"scenario": str(self.path)})
                except ScenarioError as error:
                    log.error("%s; keeping the previous scenario", error)
            return self._scenario

    def _name(self, op: Operation) -> str:
        """The DCMI function ``op`` stands for, as the API in use names it."""
        return v2_name(DCMI_FUNCTIONS[op]) if self._v2 else DCMI_FUNCTIONS[op]

    def _call(self, op: Operation, target: Target, body: Callable[[FakeScenario], T]) -> T:
        """Run one operation as the driver would: missing symbol, latency, hangs, then injected errors."""
        function = self._name(op)
        if self._lacking is not None and DCMI_FUNCTIONS[op] in self._lacking:
            raise SymbolMissing(function, str(self.path))
        scenario = self.scenario()
        if scenario.latency_ms:
            time.sleep(scenario.latency_ms / 1000)
        while not self._closed.is_set():
            now = self.scenario()
            if op not in now.hang and ((hung := target(now)) is None or op not in hung.chip.hang):
                break
            time.sleep(self._poll_seconds)
        scenario = self.scenario()
        if op != "init" and not self._initialised:
            raise DcmiError(function, NOT_INITIALISED)
        code = scenario.errors.get(op)
        chip = target(scenario)
        if chip is not None:
            code = chip.chip.errors.get(op, code)
        if code is not None:
            raise DcmiError(function, code)
        return body(scenario)

    def _on_chip(self, op: Operation, card_id: int, device_id: int, body: _Reader[T]) -> T:
        """An operation about one chip: -8001 for an unknown one; -8012 during its reset (but see
        ANSWERED_WHILE_RESETTING)."""

        def run(scenario: FakeScenario) -> T:
            placed = scenario.by_address.get((card_id, device_id))
            if placed is None:
                raise DcmiError(self._name(op), INVALID_PARAMETER)
            self._driver.refresh()
            if op not in ANSWERED_WHILE_RESETTING and self._driver.resetting(scenario, placed):
                raise DcmiError(self._name(op), NOT_READY)
            return body(scenario, placed)

        return self._call(op, _at(card_id, device_id), run)

    def _fact(self, op: Operation, card_id: int, device_id: int, read: _Reader[T | None]) -> T:
        """:meth:`_on_chip` of a fact the scenario may not give: -8255 (not supported) then."""

        def body(scenario: FakeScenario, placed: PlacedChip) -> T:
            value = read(scenario, placed)
            if value is None:
                raise DcmiError(self._name(op), NOT_SUPPORTED)
            return value

        return self._on_chip(op, card_id, device_id, body)

    # -- DeviceLibrary -----------------------------------------------------------

    def init(self) -> None:
        self._init(v2=False)

    def init_v2(self) -> None:
        """``dcmiv2_init``: -8255 unless the node is a 950, whose driver answers v2 alone."""
        self._init(v2=True)

    def _init(self, *, v2: bool) -> None:
        """Either API's init; the other API answers -8255 before anything else, as the driver does."""

        def body(_: FakeScenario) -> None:
            self._initialised = True

        scenario = self.scenario()
        if scenario.speaks_v2 != v2:
            raise DcmiError(v2_name("dcmi_init") if v2 else "dcmi_init", NOT_SUPPORTED)
        self._closed.clear()
        self._lacking = frozenset(DCMI_FUNCTIONS[op] for op in scenario.missing)
        self._v2 = v2
        self._call("init", _node, body)

    def missing_functions(self) -> frozenset[str]:
        """The optional functions the driver lacks, by their v1 names (in either API)."""
        if self._lacking is None:
            raise DcmiError("missing_functions", NOT_INITIALISED)
        names = self._lacking & OPTIONAL_FUNCTIONS
        return names & V2_NAMES.keys() if self._v2 else names

    def v2(self) -> DeviceLibraryV2:
        return cast(DeviceLibraryV2, FakeV2Library(self))

    def driver_version(self) -> str:
        return self._call("driver_version", _node, lambda s: s.driver_version)

    def logic_ids(self) -> list[int]:
        """``dcmiv2_get_device_list``: the chips' logical ids, ascending."""
        return self._call("card_list", _node, lambda s: sorted(p.logic_id for p in s.placed))

    def address(self, logic_id: int) -> tuple[int, int]:
        """The (card, device) of the chip with ``logic_id``: (-1, -1), which no call knows, for none."""
        placed = _with_logic_id(logic_id)(self.scenario())
        return (-1, -1) if placed is None else (placed.card_id, placed.device_id)

    def card_list(self) -> list[int]:
        return self._call("card_list", _node, lambda s: sorted({p.card_id for p in s.placed}))

    def device_count(self, card_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            on_card = [p for p in scenario.placed if p.card_id == card_id]
            if not on_card:
                raise DcmiError(self._name("device_count"), INVALID_PARAMETER)
            return len(on_card)

        return self._call("device_count", _node, body)

    def logic_id(self, card_id: int, device_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            on_card = [p for p in scenario.placed if p.card_id == card_id]
            placed = scenario.by_address.get((card_id, device_id))
            if placed is not None:
                return placed.logic_id
            # The index after the last NPU is the MCU: "not supported", not "invalid".
            code = NOT_SUPPORTED if on_card and device_id == len(on_card) else INVALID_PARAMETER
            raise DcmiError(self._name("logic_id"), code)

        return self._call("logic_id", _at(card_id, device_id), body)

    def phy_id(self, logic_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            placed = _with_logic_id(logic_id)(scenario)
            if placed is None:
                raise DcmiError(self._name("phy_id"), INVALID_PARAMETER)
            return placed.chip.phy_id

        return self._call("phy_id", _with_logic_id(logic_id), body)

    def chip_info(self, card_id: int, device_id: int) -> ChipInfo:
        return self._on_chip(
            "chip_info",
            card_id,
            device_id,
            lambda s, placed: ChipInfo(
                chip_type=s.chip_type,
                chip_name=s.chip_name_of(placed.chip),
                chip_ver=s.chip_ver,
                aicore_cnt=s.aicore_cnt,
                npu_name=s.npu_name,
            ),
        )

    def total_aicore(self, card_id: int, device_id: int) -> float:
        return self._fact("total_aicore", card_id, device_id, lambda s, p: s.aicore_of(p.chip))

    def health(self, card_id: int, device_id: int) -> int:
        return self._on_chip(
            "health",
            card_id,
            device_id,
            lambda s, placed: 0 if self._driver.repaired(s, placed, self._stamp) else placed.chip.health,
        )

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        return self._on_chip(
            "error_codes", card_id, device_id, lambda s, placed: list(self._codes(s, placed))
        )

    def hbm_info(self, card_id: int, device_id: int) -> HbmInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> HbmInfo:
            if not scenario.has_hbm(placed.chip):
                raise DcmiError(self._name("hbm_info"), NOT_SUPPORTED)
            total, used = self._memory(scenario, placed)
            readings = scenario.telemetry_of(placed.chip)
            return HbmInfo(
                total_mb=total,
                used_mb=used,
                freq_mhz=readings.frequency_mhz.hbm,
                temperature_c=readings.hbm_temperature_c,
                bandwidth_utilization=readings.hbm_bandwidth_pct,
            )

        return self._on_chip("hbm_info", card_id, device_id, body)

    def memory_info(self, card_id: int, device_id: int) -> DdrInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> DdrInfo:
            if not scenario.has_ddr(placed.chip):
                raise DcmiError(self._name("memory_info"), NOT_SUPPORTED)
            total, used = self._memory(scenario, placed)
            return DdrInfo(
                total_mb=total,
                used_mb=used,
                available_mb=total - used,
                freq_mhz=scenario.telemetry_of(placed.chip).frequency_mhz.ddr,
                hugepage_size_kb=0,
                hugepages_total=0,
                hugepages_free=0,
                utilization=used * 100 // total if total else 0,
            )

        return self._on_chip("memory_info", card_id, device_id, body)

    def pcie_address(self, card_id: int, device_id: int) -> PcieAddress:
        return self._fact("pcie_address", card_id, device_id, lambda s, p: s.pcie_of(p.chip))

    def vdev_ids(self, card_id: int, device_id: int) -> list[int]:
        def body(scenario: FakeScenario, placed: PlacedChip) -> list[int]:
            return [vdev.vdev_id for vdev in self._vdevs("total_aicore", scenario, placed)]

        return self._on_chip("total_aicore", card_id, device_id, body)

    def vdev_info(self, card_id: int, device_id: int, vdev_id: int) -> VdevInfo:
        return self._on_chip(
            "vdev_info", card_id, device_id, lambda s, placed: self._vdev("vdev_info", s, placed, vdev_id)
        )

    def device_ip(self, card_id: int, device_id: int) -> str:
        def body(scenario: FakeScenario, placed: PlacedChip) -> str:
            address = placed.chip.device_ip
            if address is None:
                code = NOT_SUPPORTED if scenario.is_soc(placed.chip) else NO_ADDRESS
                raise DcmiError(self._name("device_ip"), code)
            return str(address)

        return self._on_chip("device_ip", card_id, device_id, body)

    # -- telemetry ---------------------------------------------------------------

    def temperature(self, card_id: int, device_id: int) -> int:
        return self._on_chip(
            "temperature", card_id, device_id, lambda s, p: s.telemetry_of(p.chip).temperature_c
        )

    def power(self, card_id: int, device_id: int) -> Power:
        return self._on_chip(
            "power", card_id, device_id, lambda s, p: Power(round(s.telemetry_of(p.chip).power_w * 10))
        )

    def board_power(self, card_id: int) -> Power:
        def body(scenario: FakeScenario) -> Power:
            if _first_on_card(card_id)(scenario) is None:
                raise DcmiError(self._name("board_power"), INVALID_PARAMETER)
            return Power(round(scenario.board_power_w(card_id) * 10))

        return self._call("board_power", _first_on_card(card_id), body)

    def voltage(self, card_id: int, device_id: int) -> Voltage:
        return self._on_chip(
            "voltage", card_id, device_id, lambda s, p: Voltage(round(s.telemetry_of(p.chip).voltage_v * 100))
        )

    def frequency(self, card_id: int, device_id: int, kind: FrequencyType) -> int:
        def body(scenario: FakeScenario, placed: PlacedChip) -> int:
            clock = _kind(self._name("frequency"), FrequencyType, kind)
            if clock not in scenario.frequency_types(placed.chip):
                raise DcmiError(self._name("frequency"), NOT_SUPPORTED)
            return scenario.telemetry_of(placed.chip).frequency_mhz.of(clock)

        return self._on_chip("frequency", card_id, device_id, body)

    def utilization(self, card_id: int, device_id: int, kind: UtilizationType) -> int:
        def body(scenario: FakeScenario, placed: PlacedChip) -> int:
            function = self._name("utilization")
            what = _kind(function, UtilizationType, kind)
            if what not in scenario.utilization_types(placed.chip):
                raise DcmiError(function, NOT_SUPPORTED)
            return scenario.telemetry_of(placed.chip).utilization_pct.of(what)

        return self._on_chip("utilization", card_id, device_id, body)

    def multi_utilization(self, card_id: int, device_id: int) -> MultiUtilization:
        return self._on_chip(
            "multi_utilization", card_id, device_id, lambda s, p: self._multi("multi_utilization", s, p)
        )

    def multi_utilization_period(self, card_id: int, device_id: int, period_s: int) -> MultiUtilization:
        def body(scenario: FakeScenario, placed: PlacedChip) -> MultiUtilization:
            if period_s not in _PERIODS:
                raise DcmiError(self._name("multi_utilization_period"), INVALID_PARAMETER)
            return self._multi("multi_utilization_period", scenario, placed)

        return self._on_chip("multi_utilization_period", card_id, device_id, body)

    def ecc_info(self, card_id: int, device_id: int, kind: EccDeviceType) -> EccInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> EccInfo | None:
            memory = _kind(self._name("ecc_info"), EccDeviceType, kind)
            own: EccKind = "hbm" if scenario.has_hbm(placed.chip) else "ddr"
            return scenario.telemetry_of(placed.chip).ecc_of(memory, own)

        return self._fact("ecc_info", card_id, device_id, body)

    def network_health(self, card_id: int, device_id: int) -> int:
        return self._fact("network_health", card_id, device_id, lambda s, p: s.network_health_of(p.chip))

    def die_id(self, card_id: int, device_id: int, kind: DieType) -> DieId:
        def body(scenario: FakeScenario, placed: PlacedChip) -> DieId:
            die = _kind(self._name("die_id"), DieType, kind)
            if die not in scenario.die_types(placed.chip):
                raise DcmiError(self._name("die_id"), NOT_SUPPORTED)
            return scenario.die_of(placed.chip, die)

        return self._on_chip("die_id", card_id, device_id, body)

    def processes(self, card_id: int, device_id: int) -> list[ProcessMemory]:
        return self._on_chip(
            "processes",
            card_id,
            device_id,
            lambda _, p: [ProcessMemory(pid=q.pid, memory_bytes=q.memory_bytes) for q in p.chip.processes],
        )

    # -- hot reset -----------------------------------------------------------------

    def reset(self, card_id: int, device_id: int, channel: ResetChannel) -> None:
        def body(scenario: FakeScenario, placed: PlacedChip) -> None:
            function = self._name("reset")
            way = _kind(function, ResetChannel, channel)
            group = reset_group(scenario, placed)
            if group is None or (way is ResetChannel.OUTBAND and placed.chip.outband_channel != 1):
                raise DcmiError(function, NOT_SUPPORTED)
            self._driver.start_reset(group, self._stamp)

        self._on_chip("reset", card_id, device_id, body)

    def boot_status(self, card_id: int, device_id: int) -> int:
        return self._on_chip("boot_status", card_id, device_id, self._driver.boot_status)

    def brother_card(self, card_id: int, device_id: int) -> int:
        def body(scenario: FakeScenario, placed: PlacedChip) -> int:
            function = self._name("brother_card")
            if not scenario.is_a3(placed.chip):
                raise DcmiError(function, NOT_SUPPORTED)
            if placed.chip.brother_card is not None:
                return placed.chip.brother_card
            if not (0 <= card_id < _BROTHER_CARDS and 0 <= device_id < _BROTHER_DEVICES):
                raise DcmiError(function, INVALID_PARAMETER)
            return card_id - _BROTHER_OFFSET if card_id >= _BROTHER_OFFSET else card_id + _BROTHER_OFFSET

        return self._on_chip("brother_card", card_id, device_id, body)

    def outband_channel_state(self, card_id: int, device_id: int) -> int:
        return self._fact("outband_channel_state", card_id, device_id, lambda _, p: p.chip.outband_channel)

    # -- identity in a super pod -----------------------------------------------------

    def super_pod_info(self, card_id: int, device_id: int) -> SuperPodInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> SuperPodInfo | None:
            pod = scenario.super_pod_of(placed.chip)
            if pod is None:
                return None
            return SuperPodInfo(
                sdid=placed.chip.phy_id,
                scale_type=pod.scale_type,
                super_pod_id=pod.super_pod_id,
                server_id=pod.server_id,
                chassis_id=pod.chassis_id,
                super_pod_type=pod.super_pod_type,
            )

        return self._fact("super_pod_info", card_id, device_id, body)

    # -- vNPUs on demand -------------------------------------------------------------

    def vdev_activity(self, card_id: int, device_id: int, vdev_id: int) -> VdevActivity:
        def body(scenario: FakeScenario, placed: PlacedChip) -> VdevActivity:
            vdev = self._vdev("vdev_activity", scenario, placed, vdev_id)
            usage = placed.chip.vdev_usage.get(vdev_id)
            total = vdev.memory_mb * 1024
            used = min(usage.memory_used_mb * 1024, total) if usage is not None else 0
            busy = usage.aicore_utilization if usage is not None else 0
            return VdevActivity(vdev_id, busy, memory_total_kb=total, memory_free_kb=total - used)

        return self._on_chip("vdev_activity", card_id, device_id, body)

    def create_vdev(
        self,
        card_id: int,
        device_id: int,
        template: str,
        vdev_id: int | None = None,
        vfg_id: int | None = None,
    ) -> CreatedVdev:
        template_name_bytes(template)  # as the binding: a name that cannot be passed never reaches the driver
        return self._on_chip(
            "create_vdev",
            card_id,
            device_id,
            lambda s, placed: self._driver.create(s, placed, template, vdev_id, vfg_id),
        )

    def destroy_vdev(self, card_id: int, device_id: int, vdev_id: int) -> None:
        self._on_chip(
            "destroy_vdev", card_id, device_id, lambda s, placed: self._driver.destroy(s, placed, vdev_id)
        )

    def subscribe_faults(self, handler: FaultHandler) -> None:
        def body(scenario: FakeScenario) -> None:
            if not scenario.subscription_supported():
                raise DcmiError(self._name("subscribe_faults"), NOT_SUPPORTED)
            self._watcher = threading.Thread(
                target=self._deliver_events, args=(handler, scenario), name="fake-dcmi-events", daemon=True
            )
            self._watcher.start()

        self._call("subscribe_faults", _node, body)

    def affinity_cpu(self, card_id: int, device_id: int) -> str:
        cpus = self._fact("affinity_cpu", card_id, device_id, lambda _, p: p.chip.cpu_affinity)
        return cpus[:_AFFINITY_CHARACTERS]

    def close(self) -> None:
        self._initialised = False
        self._lacking = None
        self._v2 = False
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=1)
        self._watcher = None

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _memory(scenario: FakeScenario, placed: PlacedChip) -> tuple[int, int]:
        """The chip's memory and how much of it is in use, in MB."""
        total = scenario.memory_mb_of(placed.chip)
        return total, min(scenario.telemetry_of(placed.chip).memory_used_mb, total)

    def _multi(self, op: Operation, scenario: FakeScenario, placed: PlacedChip) -> MultiUtilization:
        """The multi-rate sample, on the 910B, A3 and 950 drivers that have it."""
        if scenario.has_ddr(placed.chip):
            raise DcmiError(self._name(op), NOT_SUPPORTED)
        return scenario.telemetry_of(placed.chip).utilization_pct.multi()

    def _vdevs(self, op: Operation, scenario: FakeScenario, placed: PlacedChip) -> list[VdevInfo]:
        """The chip's vNPUs; -8255 where the driver has no VDEV_MNG."""
        if scenario.aicore_of(placed.chip) is None:
            raise DcmiError(self._name(op), NOT_SUPPORTED)
        return self._driver.vdevs(scenario, placed)

    def _vdev(self, op: Operation, scenario: FakeScenario, placed: PlacedChip, vdev_id: int) -> VdevInfo:
        """One of the chip's vNPUs; -8001 for an id not on it."""
        found = next((v for v in self._vdevs(op, scenario, placed) if v.vdev_id == vdev_id), None)
        if found is None:
            raise DcmiError(self._name(op), INVALID_PARAMETER)
        return found

    def _codes(self, scenario: FakeScenario, placed: PlacedChip) -> tuple[int, ...]:
        """The fault codes the chip reports: none once a reset repaired it."""
        return () if self._driver.repaired(scenario, placed, self._stamp) else placed.chip.fault_codes

    def _deliver_events(self, handler: FaultHandler, scenario: FakeScenario) -> None:
        """Library thread: events for codes that appear or clear, each scenario event once, storms."""
        self._driver.refresh()
        known = {p.logic_id: set(self._codes(scenario, p)) for p in scenario.placed}
        while not self._closed.wait(self._poll_seconds):
            for event in self._new_events(self.scenario(), known):
                try:
                    handler(event)
                except Exception:  # as the binding's callback does: one event lost, not the subscription
                    log.exception("handling a fake DCMI fault event failed; the event is dropped")

    def _new_events(self, scenario: FakeScenario, known: dict[int, set[int]]) -> list[FaultEvent]:
        """The events from ``known`` to ``scenario`` (a chip in a reset changes nothing)."""
        events = []
        self._driver.refresh()
        for placed in scenario.placed:
            chip, logic = placed.chip, placed.logic_id
            before = known.get(logic, set())
            now = before if self._driver.resetting(scenario, placed) else set(self._codes(scenario, placed))
            events += [FaultEvent(logic, code, chip.fault_severity, 1) for code in sorted(now - before)]
            events += [FaultEvent(logic, code, chip.fault_severity, 0) for code in sorted(before - now)]
            known[logic] = now
            for event in chip.events:
                if (logic, event.serial) not in self._delivered:
                    self._delivered.add((logic, event.serial))
                    severity = chip.event_severity(event)
                    events.append(FaultEvent(logic, event.code, severity, event.assertion, event.serial))
            events += self._storm_events(placed)
        return events

    def _storm_events(self, placed: PlacedChip) -> list[FaultEvent]:
        """The events of the chip's storm that came due since the last look."""
        storm, logic = placed.chip.storm, placed.logic_id
        if storm is None:
            return []
        now = time.monotonic()
        run = self._storms.get(logic)
        if run is None or run.serial != storm.serial:
            run = self._storms[logic] = _StormRun(storm.serial, now)
        # A driver's event thread calls the handler for each event in turn: it cannot get ahead of it.
        sent, run.sent = run.sent, min(storm.due(now - run.started), run.sent + STORM_BATCH)
        steps = storm.steps
        return [
            FaultEvent(logic, step.code, placed.chip.event_severity(step), step.assertion, storm.serial + i)
            for i in range(sent, run.sent)
            for step in (steps[i % len(steps)],)
        ]
