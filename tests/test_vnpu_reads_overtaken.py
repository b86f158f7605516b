"""A poll's read of a chip's vNPUs that a destroy overtook is not recorded: it would bring back a vNPU just
destroyed, and the chip would read as split until the next poll (a whole-chip claim refused meanwhile)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored
from node_harness import backend_of, inventory_of
from split_nodes import duo

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faces.dra.vnpus import ChipVnpus
from ascend_plugin.inventory.inventory import Inventory
from backends.chips import Chip
from backends.library import VdevInfo

pytestmark = pytest.mark.anyio


def vnpu_ids(watched: Monitored) -> list[int] | None:
    state = watched.inventory.get(0)
    assert state is not None
    return None if state.vnpus is None else [vnpu.vdev_id for vnpu in state.vnpus]


class HeldRead:
    """The backend's vNPU read, held after it has read (its answer then already old) until released."""

    def __init__(self, watched: Monitored) -> None:
        self.read = watched.backend.vnpus
        self.holding = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, chip: Chip) -> list[VdevInfo]:
        found = self.read(chip)
        if self.holding:
            self.entered.set()
            self.released.wait(30)
        return found


async def test_a_read_begun_before_a_destroy_does_not_bring_the_vnpu_back(
    any_fake: ScenarioPlayer[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with monitored(any_fake.open(duo())) as watched:
        watched.inventory.facts = dataclasses.replace(watched.inventory.facts, reads_vnpus=True)
        held = HeldRead(watched)
        monkeypatch.setattr(watched.backend, "vnpus", held)
        await watched.monitor.poll_all()
        assert vnpu_ids(watched) == [100, 101, 102]
        held.holding = True
        # The destroy runs on lanes of its own, so that it ends while the poll's read is held.
        other_lanes = ChipCalls(5.0)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watched.monitor.poll_all)
                await anyio.to_thread.run_sync(held.entered.wait, 30)
                await ChipVnpus(watched.backend, other_lanes, watched.inventory).destroy(0, 101)
                assert vnpu_ids(watched) == [100, 102], "dropped at once by the destroy"
                held.released.set()
            assert vnpu_ids(watched) == [100, 102], "the read begun before the destroy is not recorded"
            held.holding = False
            await watched.monitor.poll_all()
            assert vnpu_ids(watched) == [100, 102]
        finally:
            held.released.set()
            other_lanes.shutdown()


def test_a_stale_first_read_is_recorded_and_a_later_one_dropped(any_fake: ScenarioPlayer[Any]) -> None:
    """Until a first read the chip is never offered healthy: a stale first read beats none."""
    library = any_fake.open(duo())
    known = inventory_of(library)
    chips = known.chips()
    facts = dataclasses.replace(known.facts, reads_vnpus=True)
    inventory = Inventory(facts, [dataclasses.replace(state, vnpus=None) for state in chips])
    read = tuple(backend_of(library).vnpus(chips[0].chip))
    seen = inventory.vnpu_edits(0)
    inventory.vnpus_edited(0)
    assert inventory.set_vnpus(0, read, read_at=seen), "nothing known yet: recorded"
    seen = inventory.vnpu_edits(0)
    inventory.vnpus_edited(0)
    assert not inventory.set_vnpus(0, (), read_at=seen), "overtaken: dropped"
    assert inventory.set_vnpus(0, (), read_at=inventory.vnpu_edits(0)), "not overtaken: recorded"
