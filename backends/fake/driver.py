"""The fake driver's own behaviour over a scenario: vNPUs made and destroyed, chips resetting.

Kept in the driver-state file (:mod:`.driver_state`), so it outlives the process as a real driver's does.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from backends.errors import INVALID_PARAMETER, NOT_SUPPORTED, DcmiError
from backends.fake.driver_state import DriverState, DriverStateFile, MadeVdev, Reset, Stamp
from backends.fake.scenario import FakeScenario, PlacedChip
from backends.library import ALL_VDEVS, BootStatus, CreatedVdev, VdevInfo

log = logging.getLogger(__name__)

RESOURCE_OCCUPIED: Final = -8020
_BOOTING: Final = (BootStatus.UNINIT, BootStatus.BIOS, BootStatus.OS, BootStatus.FINISH)


def reset_group(scenario: FakeScenario, placed: PlacedChip) -> list[PlacedChip] | None:
    """The chips one reset of ``placed`` takes down (a 300I Duo: its card); None where refused."""
    on_card = [p for p in scenario.placed if p.card_id == placed.card_id]
    if scenario.chip_name_of(placed.chip).startswith("310P") and len(on_card) == 2:
        return on_card if placed.device_id == 0 else None
    return [placed]


class FakeDriver:
    """Driver state of one scenario file, and the rules that read and change it."""

    def __init__(self, scenario_path: Path) -> None:
        self._file = DriverStateFile.beside(scenario_path)
        self._lock = threading.Lock()  # the file's cache, between the caller's threads
        self._state = DriverState()

    def refresh(self) -> None:
        """Read the state file again if it changed: once per call, before the rules below are asked."""
        with self._lock:
            self._state = self._file.read()

    def state(self) -> DriverState:
        """The state as last read (by :meth:`refresh`) or written here."""
        return self._state

    # -- resets ------------------------------------------------------------------

    def _window(self, scenario: FakeScenario, placed: PlacedChip, reset: Reset) -> float:
        """How far into its reset ``placed`` is, 0 to 1 (1: back)."""
        seconds = scenario.reset_seconds_of(placed.chip)
        if seconds <= 0:
            return 1.0
        return min((time.monotonic_ns() - reset.since_ns) / (seconds * 1e9), 1.0)

    def resetting(self, scenario: FakeScenario, placed: PlacedChip) -> bool:
        reset = self.state().reset_of(placed.chip.phy_id)
        return reset is not None and self._window(scenario, placed, reset) < 1.0

    def boot_status(self, scenario: FakeScenario, placed: PlacedChip) -> int:
        reset = self.state().reset_of(placed.chip.phy_id)
        progress = 1.0 if reset is None else self._window(scenario, placed, reset)
        if progress >= 1.0:
            return int(BootStatus.SYSTEM_START_FINISH)
        return int(_BOOTING[int(progress * len(_BOOTING))])

    def repaired(self, scenario: FakeScenario, placed: PlacedChip, stamp: Stamp | None) -> bool:
        """Whether a reset cleared ``placed``'s faults and the scenario has not been written since."""
        reset = self.state().reset_of(placed.chip.phy_id)
        return (
            reset is not None
            and placed.chip.reset_clears_faults
            and reset.scenario == stamp
            and self._window(scenario, placed, reset) >= 1.0
        )

    def start_reset(self, group: Sequence[PlacedChip], stamp: Stamp | None) -> None:
        since = time.monotonic_ns()
        scenario_stamp = stamp if stamp is not None else (0, 0, 0, 0)

        def edit(state: DriverState) -> DriverState:
            for placed in group:
                state = state.with_reset(Reset(placed.chip.phy_id, since, scenario_stamp))
            return state

        with self._lock:
            self._state = self._file.change(edit)

    # -- vNPUs -------------------------------------------------------------------

    @staticmethod
    def _visible(state: DriverState, scenario: FakeScenario, placed: PlacedChip) -> list[VdevInfo]:
        phy = placed.chip.phy_id
        static = [v for v in scenario.vdevs_of(placed.chip) if (phy, v.vdev_id) not in state.gone]
        ids = {v.vdev_id for v in static}
        made = [
            VdevInfo(m.vdev_id, m.template, m.aicore, m.memory_mb, m.vfg_id, status=0, in_use=False)
            for m in state.made
            if m.phy_id == phy and m.vdev_id not in ids
        ]
        usage = placed.chip.vdev_usage
        return [
            replace(v, in_use=v.in_use or (v.vdev_id in usage and usage[v.vdev_id].in_use))
            for v in static + made
        ]

    def vdevs(self, scenario: FakeScenario, placed: PlacedChip) -> list[VdevInfo]:
        """``placed``'s vNPUs: the scenario's not destroyed, then those made through DCMI."""
        return self._visible(self.state(), scenario, placed)

    def create(
        self,
        scenario: FakeScenario,
        placed: PlacedChip,
        template: str,
        vdev_id: int | None,
        vfg_id: int | None,
    ) -> CreatedVdev:
        """Make a vNPU of ``template`` on ``placed`` (``dcmi_create_vdevice``)."""
        function = "dcmi_create_vdevice"
        room = scenario.room_of(placed.chip)
        if room is None:
            raise DcmiError(function, NOT_SUPPORTED)
        cost = room.templates.get(template)
        if cost is None:
            raise DcmiError(function, INVALID_PARAMETER)  # the driver checks the name against its table
        if vdev_id is not None and not room.first_id <= vdev_id <= room.last_id:
            raise DcmiError(function, INVALID_PARAMETER)
        made: list[CreatedVdev] = []

        def edit(state: DriverState) -> DriverState:
            existing = self._visible(state, scenario, placed)
            taken = self._node_vdev_ids(state, scenario)
            chosen = room.free_id(taken) if vdev_id is None else (None if vdev_id in taken else vdev_id)
            if chosen is None or not room.fits(existing, cost):
                raise DcmiError(function, RESOURCE_OCCUPIED)
            used_groups = {v.vfg_id for v in existing}
            group = vfg_id if vfg_id is not None else next(n for n in range(64) if n not in used_groups)
            made.append(CreatedVdev(chosen, group, 0, 0, 0))
            record = MadeVdev(placed.chip.phy_id, chosen, template, cost.aicore, cost.memory_mb, group)
            return replace(self._pruned(state, scenario), made=(*state.made, record))

        with self._lock:
            self._state = self._file.change(edit)
        self._device_node(scenario, made[0].vdev_id, present=True)
        return made[0]

    def destroy(self, scenario: FakeScenario, placed: PlacedChip, vdev_id: int) -> None:
        """Destroy one vNPU of ``placed``, or all of them (``ALL_VDEVS``)."""
        function = "dcmi_set_destroy_vdevice"
        if scenario.room_of(placed.chip) is None:
            raise DcmiError(function, NOT_SUPPORTED)
        destroyed: list[int] = []

        def edit(state: DriverState) -> DriverState:
            existing = self._visible(state, scenario, placed)
            doomed = existing if vdev_id == ALL_VDEVS else [v for v in existing if v.vdev_id == vdev_id]
            if vdev_id != ALL_VDEVS and not doomed:
                raise DcmiError(function, INVALID_PARAMETER)
            if any(v.in_use for v in doomed):
                raise DcmiError(function, RESOURCE_OCCUPIED)
            ids = {v.vdev_id for v in doomed}
            destroyed.extend(sorted(ids))
            phy = placed.chip.phy_id
            static = {v.vdev_id for v in scenario.vdevs_of(placed.chip)}
            state = self._pruned(state, scenario)
            return replace(
                state,
                made=tuple(m for m in state.made if not (m.phy_id == phy and m.vdev_id in ids)),
                gone=state.gone | {(phy, n) for n in ids & static},
            )

        with self._lock:
            self._state = self._file.change(edit)
        for number in destroyed:
            self._device_node(scenario, number, present=False)

    @staticmethod
    def _node_vdev_ids(state: DriverState, scenario: FakeScenario) -> set[int]:
        """Every vNPU id in use on the node (ids are node-wide)."""
        static = {
            v.vdev_id
            for p in scenario.placed
            for v in scenario.vdevs_of(p.chip)
            if (p.chip.phy_id, v.vdev_id) not in state.gone
        }
        return static | {m.vdev_id for m in state.made}

    @staticmethod
    def _pruned(state: DriverState, scenario: FakeScenario) -> DriverState:
        """``state`` without "destroyed" marks of static vNPUs the scenario no longer lists."""
        listed = {(p.chip.phy_id, v.vdev_id) for p in scenario.placed for v in p.chip.vdevs}
        return replace(state, gone=frozenset(state.gone & listed))

    @staticmethod
    def _device_node(scenario: FakeScenario, vdev_id: int, *, present: bool) -> None:
        """Make or remove ``vdavinci<vdev_id>`` in ``vdev_node_dir``, as the driver does in /dev."""
        if scenario.vdev_node_dir is None:
            return
        node = scenario.vdev_node_dir / f"vdavinci{vdev_id}"
        try:
            if present:
                node.parent.mkdir(parents=True, exist_ok=True)
                node.touch()
            else:
                node.unlink(missing_ok=True)
        except OSError as error:
            log.error(
                "fake driver: cannot %s %s: %s",
                "make" if present else "remove",
                node,
                os.strerror(error.errno or 0),
            )
