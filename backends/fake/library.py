"""FakeLibrary: a DeviceLibrary that plays a scenario file.

The file is re-read whenever it changes (inode, size, mtime or ctime), so a
person or a test can inject a fault into a running plugin by editing it. An
invalid edit is logged and the previous scenario stays in force. A scenario
can make any operation fail with a DCMI code, take time, or hang until the
file no longer says so.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from backends.errors import INVALID_PARAMETER, NOT_INITIALISED, NOT_SUPPORTED, DcmiError
from backends.fake.scenario import FakeScenario, Operation, PlacedChip, ScenarioError, load_scenario
from backends.library import ChipInfo, FaultEvent, FaultHandler, MemoryInfo

log = logging.getLogger(__name__)

# The DCMI function each operation stands for, so errors read like real ones.
DCMI_FUNCTIONS: Final[dict[Operation, str]] = {
    "init": "dcmi_init",
    "driver_version": "dcmi_get_driver_version",
    "card_list": "dcmi_get_card_list",
    "device_count": "dcmi_get_device_num_in_card",
    "logic_id": "dcmi_get_device_logic_id",
    "phy_id": "dcmi_get_device_phyid_from_logicid",
    "chip_info": "dcmi_get_device_chip_info_v2",
    "total_aicore": "dcmi_get_device_info",
    "health": "dcmi_get_device_health",
    "error_codes": "dcmi_get_device_errorcode_v2",
    "hbm_info": "dcmi_get_device_hbm_info",
    "memory_info": "dcmi_get_device_memory_info_v3",
    "subscribe_faults": "dcmi_subscribe_fault_event",
}

_POLL_SECONDS: Final = 0.01
T = TypeVar("T")


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
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

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

    def _call(self, op: Operation, chip: PlacedChip | None, body: Callable[[FakeScenario], T]) -> T:
        """Run one operation with the scenario's latency, hangs and injected errors."""
        scenario = self.scenario()
        if scenario.latency_ms:
            time.sleep(scenario.latency_ms / 1000)
        while not self._closed.is_set() and self._hangs(op, chip):
            time.sleep(self._poll_seconds)
        scenario = self.scenario()
        if op != "init" and not self._initialised:
            raise DcmiError(DCMI_FUNCTIONS[op], NOT_INITIALISED)
        code = scenario.errors.get(op)
        if chip is not None:
            current = self._find(scenario, chip.card_id, chip.device_id)
            code = current.chip.errors.get(op, code) if current else code
        if code is not None:
            raise DcmiError(DCMI_FUNCTIONS[op], code)
        return body(scenario)

    def _hangs(self, op: Operation, chip: PlacedChip | None) -> bool:
        scenario = self.scenario()
        if op in scenario.hang:
            return True
        if chip is None:
            return False
        current = self._find(scenario, chip.card_id, chip.device_id)
        return current is not None and op in current.chip.hang

    @staticmethod
    def _find(scenario: FakeScenario, card_id: int, device_id: int) -> PlacedChip | None:
        return scenario.by_address.get((card_id, device_id))

    def _chip(self, op: Operation, card_id: int, device_id: int) -> PlacedChip:
        placed = self._find(self.scenario(), card_id, device_id)
        if placed is None:
            raise DcmiError(DCMI_FUNCTIONS[op], INVALID_PARAMETER)
        return placed

    # -- DeviceLibrary -----------------------------------------------------------

    def init(self) -> None:
        def body(_: FakeScenario) -> None:
            self._initialised = True

        self._closed.clear()
        self._call("init", None, body)

    def driver_version(self) -> str:
        return self._call("driver_version", None, lambda s: s.driver_version)

    def card_list(self) -> list[int]:
        return self._call("card_list", None, lambda s: sorted({p.card_id for p in s.placed}))

    def device_count(self, card_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            on_card = [p for p in scenario.placed if p.card_id == card_id]
            if not on_card:
                raise DcmiError(DCMI_FUNCTIONS["device_count"], INVALID_PARAMETER)
            return len(on_card)

        return self._call("device_count", None, body)

    def logic_id(self, card_id: int, device_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            on_card = [p for p in scenario.placed if p.card_id == card_id]
            placed = self._find(scenario, card_id, device_id)
            if placed is not None:
                return placed.logic_id
            # The index after the last NPU is the MCU: "not supported", not "invalid".
            code = NOT_SUPPORTED if on_card and device_id == len(on_card) else INVALID_PARAMETER
            raise DcmiError(DCMI_FUNCTIONS["logic_id"], code)

        return self._call("logic_id", None, body)

    def phy_id(self, logic_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            for placed in scenario.placed:
                if placed.logic_id == logic_id:
                    return placed.chip.phy_id
            raise DcmiError(DCMI_FUNCTIONS["phy_id"], INVALID_PARAMETER)

        return self._call("phy_id", None, body)

    def chip_info(self, card_id: int, device_id: int) -> ChipInfo:
        placed = self._chip("chip_info", card_id, device_id)
        return self._call(
            "chip_info",
            placed,
            lambda s: ChipInfo(
                chip_type=s.chip_type,
                chip_name=s.chip_name_of(placed.chip),
                chip_ver=s.chip_ver,
                aicore_cnt=s.aicore_cnt,
                npu_name=s.npu_name,
            ),
        )

    def total_aicore(self, card_id: int, device_id: int) -> float:
        placed = self._chip("total_aicore", card_id, device_id)

        def body(scenario: FakeScenario) -> float:
            aic = scenario.aicore_of(placed.chip)
            if aic is None:
                raise DcmiError(DCMI_FUNCTIONS["total_aicore"], NOT_SUPPORTED)
            return aic

        return self._call("total_aicore", placed, body)

    def health(self, card_id: int, device_id: int) -> int:
        placed = self._chip("health", card_id, device_id)
        return self._call("health", placed, lambda s: self._current(s, placed).chip.health)

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        placed = self._chip("error_codes", card_id, device_id)
        return self._call("error_codes", placed, lambda s: list(self._current(s, placed).chip.fault_codes))

    def hbm_info(self, card_id: int, device_id: int) -> MemoryInfo:
        placed = self._chip("hbm_info", card_id, device_id)
        return self._call("hbm_info", placed, lambda s: self._memory(s, placed))

    def memory_info(self, card_id: int, device_id: int) -> MemoryInfo:
        placed = self._chip("memory_info", card_id, device_id)

        def body(scenario: FakeScenario) -> MemoryInfo:
            if scenario.chip_name_of(placed.chip).startswith(("910B", "Ascend910", "A2G")):
                raise DcmiError(DCMI_FUNCTIONS["memory_info"], NOT_SUPPORTED)
            return self._memory(scenario, placed)

        return self._call("memory_info", placed, body)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        def body(scenario: FakeScenario) -> None:
            if not scenario.subscription_supported():
                raise DcmiError(DCMI_FUNCTIONS["subscribe_faults"], NOT_SUPPORTED)
            self._watcher = threading.Thread(
                target=self._deliver_events, args=(handler, scenario), name="fake-dcmi-events", daemon=True
            )
            self._watcher.start()

        self._call("subscribe_faults", None, body)

    def close(self) -> None:
        self._initialised = False
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=1)
        self._watcher = None

    # -- helpers -----------------------------------------------------------------

    def _current(self, scenario: FakeScenario, placed: PlacedChip) -> PlacedChip:
        current = self._find(scenario, placed.card_id, placed.device_id)
        return current if current is not None else placed

    @staticmethod
    def _memory(scenario: FakeScenario, placed: PlacedChip) -> MemoryInfo:
        total = placed.chip.memory_mb if placed.chip.memory_mb is not None else scenario.memory_mb
        return MemoryInfo(total_mb=total, used_mb=0)

    def _deliver_events(self, handler: FaultHandler, scenario: FakeScenario) -> None:
        """Library thread: raise an event for each fault code that appears or clears."""
        known = {p.logic_id: set(p.chip.fault_codes) for p in scenario.placed}
        while not self._closed.wait(self._poll_seconds):
            current = self.scenario()
            for placed in current.placed:
                now = set(placed.chip.fault_codes)
                before = known.get(placed.logic_id, set())
                stamp = int(time.time())
                severity = placed.chip.fault_severity
                for code in sorted(now - before):
                    handler(FaultEvent(placed.logic_id, code, severity, 1, stamp))
                for code in sorted(before - now):
                    handler(FaultEvent(placed.logic_id, code, severity, 0, stamp))
                known[placed.logic_id] = now
