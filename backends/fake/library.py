"""FakeLibrary: a DeviceLibrary that plays a scenario file.

The file is re-read whenever it changes (inode, size, mtime or ctime), so a
person or a test can inject a fault into a running plugin by editing it. An
invalid edit is logged and the previous scenario stays in force. A scenario
can make any operation fail with a DCMI code, take time, or hang until the
file no longer says so; a hang holds no lock, so it stalls its own call only.
It can also play an older driver that lacks functions (``missing``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from backends.errors import INVALID_PARAMETER, NOT_INITIALISED, NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.fake.scenario import (
    DCMI_FUNCTIONS,
    FakeScenario,
    Operation,
    PlacedChip,
    ScenarioError,
    load_scenario,
)
from backends.library import (
    OPTIONAL_FUNCTIONS,
    ChipInfo,
    FaultEvent,
    FaultHandler,
    MemoryInfo,
    PcieAddress,
    VdevInfo,
)

log = logging.getLogger(__name__)

# dcmi_get_device_ip on a chip whose RoCE port has no address: "configuration does not exist".
NO_ADDRESS: Final = -8023

_POLL_SECONDS: Final = 0.01
STORM_BATCH: Final = 1000  # events of one chip's storm delivered at most per look (every _POLL_SECONDS)
T = TypeVar("T")
# Which chip a call is about, looked up in the scenario in force at each step.
Target = Callable[[FakeScenario], PlacedChip | None]


def _at(card_id: int, device_id: int) -> Target:
    return lambda scenario: scenario.by_address.get((card_id, device_id))


def _with_logic_id(logic_id: int) -> Target:
    return lambda scenario: next((p for p in scenario.placed if p.logic_id == logic_id), None)


def _node(_: FakeScenario) -> PlacedChip | None:
    return None


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
        # The functions the "loaded driver" lacks: fixed at init, as symbols are once a library is open.
        self._missing: frozenset[str] | None = None
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        # (logic id, serial) of the scenario events delivered: each once for the life of the library.
        self._delivered: set[tuple[int, int]] = set()
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

    def _call(self, op: Operation, target: Target, body: Callable[[FakeScenario], T]) -> T:
        """Run one operation as the driver would: missing symbol, latency, hangs, then injected errors."""
        function = DCMI_FUNCTIONS[op]
        if self._missing is not None and function in self._missing:
            raise SymbolMissing(function, str(self.path))
        scenario = self.scenario()
        if scenario.latency_ms:
            time.sleep(scenario.latency_ms / 1000)
        while not self._closed.is_set() and self._hangs(op, target):
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

    def _hangs(self, op: Operation, target: Target) -> bool:
        scenario = self.scenario()
        if op in scenario.hang:
            return True
        chip = target(scenario)
        return chip is not None and op in chip.chip.hang

    def _on_chip(
        self, op: Operation, card_id: int, device_id: int, body: Callable[[FakeScenario, PlacedChip], T]
    ) -> T:
        """An operation about one chip, as the scenario in force has it; an unknown chip is -8001."""

        def run(scenario: FakeScenario) -> T:
            placed = scenario.by_address.get((card_id, device_id))
            if placed is None:
                raise DcmiError(DCMI_FUNCTIONS[op], INVALID_PARAMETER)
            return body(scenario, placed)

        return self._call(op, _at(card_id, device_id), run)

    # -- DeviceLibrary -----------------------------------------------------------

    def init(self) -> None:
        def body(_: FakeScenario) -> None:
            self._initialised = True

        self._closed.clear()
        self._missing = self.scenario().missing_functions()
        self._call("init", _node, body)

    def missing_functions(self) -> frozenset[str]:
        if self._missing is None:
            raise DcmiError("missing_functions", NOT_INITIALISED)
        return self._missing & OPTIONAL_FUNCTIONS

    def driver_version(self) -> str:
        return self._call("driver_version", _node, lambda s: s.driver_version)

    def card_list(self) -> list[int]:
        return self._call("card_list", _node, lambda s: sorted({p.card_id for p in s.placed}))

    def device_count(self, card_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            on_card = [p for p in scenario.placed if p.card_id == card_id]
            if not on_card:
                raise DcmiError(DCMI_FUNCTIONS["device_count"], INVALID_PARAMETER)
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
            raise DcmiError(DCMI_FUNCTIONS["logic_id"], code)

        return self._call("logic_id", _at(card_id, device_id), body)

    def phy_id(self, logic_id: int) -> int:
        def body(scenario: FakeScenario) -> int:
            placed = _with_logic_id(logic_id)(scenario)
            if placed is None:
                raise DcmiError(DCMI_FUNCTIONS["phy_id"], INVALID_PARAMETER)
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
        def body(scenario: FakeScenario, placed: PlacedChip) -> float:
            aic = scenario.aicore_of(placed.chip)
            if aic is None:
                raise DcmiError(DCMI_FUNCTIONS["total_aicore"], NOT_SUPPORTED)
            return aic

        return self._on_chip("total_aicore", card_id, device_id, body)

    def health(self, card_id: int, device_id: int) -> int:
        return self._on_chip("health", card_id, device_id, lambda _, placed: placed.chip.health)

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        return self._on_chip(
            "error_codes", card_id, device_id, lambda _, placed: list(placed.chip.fault_codes)
        )

    def hbm_info(self, card_id: int, device_id: int) -> MemoryInfo:
        return self._on_chip("hbm_info", card_id, device_id, self._memory)

    def memory_info(self, card_id: int, device_id: int) -> MemoryInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> MemoryInfo:
            if scenario.chip_name_of(placed.chip).startswith(("910B", "Ascend910", "A2G")):
                raise DcmiError(DCMI_FUNCTIONS["memory_info"], NOT_SUPPORTED)
            return self._memory(scenario, placed)

        return self._on_chip("memory_info", card_id, device_id, body)

    def pcie_address(self, card_id: int, device_id: int) -> PcieAddress:
        def body(scenario: FakeScenario, placed: PlacedChip) -> PcieAddress:
            address = scenario.pcie_of(placed.chip)
            if address is None:
                raise DcmiError(DCMI_FUNCTIONS["pcie_address"], NOT_SUPPORTED)
            return address

        return self._on_chip("pcie_address", card_id, device_id, body)

    def vdev_ids(self, card_id: int, device_id: int) -> list[int]:
        def body(scenario: FakeScenario, placed: PlacedChip) -> list[int]:
            if scenario.aicore_of(placed.chip) is None:
                raise DcmiError(DCMI_FUNCTIONS["total_aicore"], NOT_SUPPORTED)
            return [vdev.vdev_id for vdev in placed.chip.vdevs]

        return self._on_chip("total_aicore", card_id, device_id, body)

    def vdev_info(self, card_id: int, device_id: int, vdev_id: int) -> VdevInfo:
        def body(scenario: FakeScenario, placed: PlacedChip) -> VdevInfo:
            if scenario.aicore_of(placed.chip) is None:
                raise DcmiError(DCMI_FUNCTIONS["vdev_info"], NOT_SUPPORTED)
            for info in scenario.vdevs_of(placed.chip):
                if info.vdev_id == vdev_id:
                    return info
            raise DcmiError(DCMI_FUNCTIONS["vdev_info"], INVALID_PARAMETER)

        return self._on_chip("vdev_info", card_id, device_id, body)

    def device_ip(self, card_id: int, device_id: int) -> str:
        def body(scenario: FakeScenario, placed: PlacedChip) -> str:
            address = placed.chip.device_ip
            if address is None:
                code = NOT_SUPPORTED if scenario.is_soc(placed.chip) else NO_ADDRESS
                raise DcmiError(DCMI_FUNCTIONS["device_ip"], code)
            return str(address)

        return self._on_chip("device_ip", card_id, device_id, body)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        def body(scenario: FakeScenario) -> None:
            if not scenario.subscription_supported():
                raise DcmiError(DCMI_FUNCTIONS["subscribe_faults"], NOT_SUPPORTED)
            self._watcher = threading.Thread(
                target=self._deliver_events, args=(handler, scenario), name="fake-dcmi-events", daemon=True
            )
            self._watcher.start()

        self._call("subscribe_faults", _node, body)

    def close(self) -> None:
        self._initialised = False
        self._missing = None
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=1)
        self._watcher = None

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _memory(scenario: FakeScenario, placed: PlacedChip) -> MemoryInfo:
        return MemoryInfo(total_mb=scenario.memory_mb_of(placed.chip), used_mb=0)

    def _deliver_events(self, handler: FaultHandler, scenario: FakeScenario) -> None:
        """Library thread: events for codes that appear or clear, each scenario event once, storms."""
        known = {p.logic_id: set(p.chip.fault_codes) for p in scenario.placed}
        while not self._closed.wait(self._poll_seconds):
            for event in self._new_events(self.scenario(), known):
                try:
                    handler(event)
                except Exception:  # as the binding's callback does: one event lost, not the subscription
                    log.exception("handling a fake DCMI fault event failed; the event is dropped")

    def _new_events(self, scenario: FakeScenario, known: dict[int, set[int]]) -> list[FaultEvent]:
        """The events from what ``known`` says to ``scenario``; ``known`` and the delivered set updated."""
        events = []
        for placed in scenario.placed:
            chip, logic = placed.chip, placed.logic_id
            now, before = set(chip.fault_codes), known.get(logic, set())
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
