"""The reset budget outlives the plugin: a restart, or a crash loop, does not hand out three resets again.

The resets spent are kept as Unix times in a file beside the plugin's
sockets; a new run reads them onto its own clock. What is older than the
window is dropped; a file that cannot be read or written is said once, and
the budget goes on as if new (read) or in memory (written).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESTART_NPU, RigParts, node_scenario, reset_rig
from waiting import until

from ascend_plugin.hot_reset.budget import BUDGET_FILE, RESETS, WINDOW, ResetBudget

HOUR = 3600.0


class Clocks:
    """A run's monotonic clock and the wall clock, moved together (a new run starts its own at 0)."""

    def __init__(self) -> None:
        self.wall = 1_767_225_600.0
        self.mono = 50.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def restart(self) -> None:
        self.mono = 7.0


def budget(clocks: Clocks, path: Path) -> ResetBudget:
    return ResetBudget(lambda: clocks.mono, path=path, wall_clock=lambda: clocks.wall)


@pytest.mark.anyio
async def test_a_restarted_plugin_keeps_the_resets_spent(tmp_path: Path) -> None:
    clocks, path = Clocks(), tmp_path / BUDGET_FILE
    first = budget(clocks, path)
    await first.spend(3)
    clocks.advance(HOUR)
    await first.spend(3)
    assert json.loads(path.read_text()) == {"3": [clocks.wall - HOUR, clocks.wall]}
    clocks.advance(60)
    clocks.restart()
    again = budget(clocks, path)
    assert again.left(3) == RESETS - 2
    assert again.left(4) == RESETS
    # The first reset leaves the window 6 hours after it, on the new run's clock too.
    assert again.next_in(3) == 0.0
    await again.spend(3)
    assert again.left(3) == 0
    assert again.next_in(3) == pytest.approx(WINDOW - HOUR - 60)


@pytest.mark.anyio
async def test_resets_older_than_the_window_are_not_read_back(tmp_path: Path) -> None:
    clocks, path = Clocks(), tmp_path / BUDGET_FILE
    await budget(clocks, path).spend(0)
    clocks.advance(WINDOW + 1)
    clocks.restart()
    assert budget(clocks, path).left(0) == RESETS


@pytest.mark.anyio
@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'["3"]', b'{"x": [1], "3": "now"}'])
async def test_a_file_that_cannot_be_read_counts_as_no_resets_spent(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / BUDGET_FILE
    path.write_bytes(content)
    again = budget(Clocks(), path)
    assert again.left(3) == RESETS
    await again.spend(3)
    assert list(json.loads(path.read_text())) == ["3"], "rewritten whole at the next reset"


@pytest.mark.anyio
async def test_a_budget_that_cannot_be_written_goes_on_in_memory_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    kept = budget(Clocks(), blocked / BUDGET_FILE)  # its directory is a file
    for _ in range(RESETS):
        await kept.spend(1)
    assert kept.left(1) == 0
    said = [r for r in caplog.records if r.levelno == logging.WARNING and "written" in r.getMessage()]
    assert len(said) == 1
    assert "kept in memory only" in said[0].getMessage()


@pytest.mark.anyio
async def test_the_write_and_its_fsyncs_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow disk makes each fsync last; on the event loop it would stall every chip's health poll."""
    loop_thread = threading.current_thread()
    synced_on: list[threading.Thread] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced_on.append(threading.current_thread())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    kept = budget(Clocks(), tmp_path / BUDGET_FILE)
    await kept.spend(2)
    assert len(synced_on) == 2, "the file and its directory"
    assert loop_thread not in synced_on
    assert list(json.loads((tmp_path / BUDGET_FILE).read_text())) == ["2"], "written before spend returned"


@pytest.mark.anyio
async def test_the_plugin_writes_its_resets_beside_its_sockets(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({0: RESTART_NPU}))
        await rig.reset_done(0)
        path = rig.manager.budget.path
        assert path is not None
        assert path.parent == rig.app.settings.device_plugin_path
        await until(path.exists, "the budget written")
        assert list(json.loads(path.read_text())) == ["0"]
