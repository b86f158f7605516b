"""A hung driver call whose caller went away: how soon its chip is out, and how soon SIGTERM ends the plugin.

Run: ``python bench/lane_hang.py``. On the real binding over the C fake
libdcmi.so (tests/fake_dcmi), at the default call timeout (5 s) and health
interval (1 s); the budget of each figure in brackets:

* in process, a HealthMonitor over a 310P3 pair: chip 0's health call starts
  hanging, and a random 0-4 s later the monitor is cancelled and started again
  (as a supervised restart does); the hang's start -> chip 0 Unhealthy
  [<= timeout + 1 s];
* a plugin process on the same pair: SIGTERM a random 0-4 s into a fresh hang
  -> the process has exited [<= timeout + 2 s].
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
from common import CFakePlugin, describe_ms, print_command

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_dcmi.build import build_fake_library
from fake_dcmi.players import CFakePlayer
from fake_dcmi.scenario_file import SCENARIO_ENV
from health_harness import monitored, watching
from library_threads import hanging_in_the_c_fake, inside_the_library
from waiting import eventually, until

from ascend_plugin.inventory.monitor import HealthPolicy
from backends.fake import FakeScenario

TIMEOUT = 5.0
WAIT = 60.0  # seconds any one step may take before the benchmark gives up


def pair(hang_chip_0: bool) -> FakeScenario:
    chips = [
        {"phy_id": 0, "card_id": 4, "hang": ["health"] if hang_chip_0 else []},
        {"phy_id": 1, "card_id": 4},
    ]
    return FakeScenario.model_validate({"chip_name": "310P3", "chips": chips})


def chip_0_hangs() -> bool:
    return any(
        inside_the_library(thread)
        for thread in threading.enumerate()
        if thread.name.startswith("dcmi-chip0-")
    )


async def restarted_during_a_hang(player: CFakePlayer, rng: random.Random) -> float:
    """Seconds from the start of chip 0's hang to its verdict, the monitor restarted meanwhile."""
    player.update(pair(hang_chip_0=False))
    with monitored(player.open(), policy=HealthPolicy(interval=1.0), timeout=TIMEOUT) as watched:
        async with watching(watched):
            await until(lambda: watched.device("Ascend310P-0").healthy, "chip 0 healthy", within=WAIT)
            player.update(pair(hang_chip_0=True))
            await until(chip_0_hangs, "chip 0's call hangs", within=WAIT, every=0.001)
            hung = time.monotonic()
            await anyio.sleep(rng.uniform(0, TIMEOUT - 1))
        async with watching(watched):
            await until(
                lambda: not watched.device("Ascend310P-0").healthy, "chip 0 out", within=WAIT, every=0.001
            )
            out = time.monotonic()
        player.update(pair(hang_chip_0=False))
        await until(lambda: watched.calls.abandoned_threads == 0, "the hung call returned", within=WAIT)
    player.close_all()
    return out - hung


def stopped_during_a_hang(library: Path, rng: random.Random) -> float:
    """Seconds from SIGTERM, a random moment into a fresh hang, to the plugin process gone."""
    node = CFakePlugin(library, pair(hang_chip_0=False))
    try:
        node.write(pair(hang_chip_0=True))
        eventually(
            lambda: hanging_in_the_c_fake(node.plugin.pid), "chip 0's call hangs", within=WAIT, every=0.001
        )
        time.sleep(rng.uniform(0, TIMEOUT - 1))
        stopped = time.monotonic()
        node.plugin.terminate()
        node.plugin.wait(timeout=WAIT)
        return time.monotonic() - stopped
    finally:
        if node.plugin.poll() is None:
            node.plugin.kill()
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--times", type=int, default=5, help="hangs of each kind")
    args = parser.parse_args()
    rng = random.Random(7)
    library = build_fake_library()
    print_command()
    logging.disable(logging.CRITICAL)  # the monitor in this process says what the figures show
    restarted = []
    with tempfile.TemporaryDirectory(prefix="adp-bench-") as scratch:
        player = CFakePlayer(Path(scratch) / "scenario.txt", library)
        os.environ[SCENARIO_ENV] = str(player.scenario_path)
        for _ in range(args.times):
            restarted.append(anyio.run(restarted_during_a_hang, player, rng))
    print(
        describe_ms(
            f"hang start -> Unhealthy, the monitor restarted during the hang [<= {TIMEOUT + 1:g} s]",
            restarted,
        )
    )
    stopped = [stopped_during_a_hang(library, rng) for _ in range(args.times)]
    print(describe_ms(f"SIGTERM during a fresh hang -> process exited [<= {TIMEOUT + 2:g} s]", stopped))


if __name__ == "__main__":
    main()
