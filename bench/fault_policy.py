"""The fault policy's cost per health round: judging chips, and reading the fault configuration.

Run: ``python bench/fault_policy.py`` (or ``nox -s bench``). A 16-chip node
with Huawei's built-in configuration is polled round after round: each round
reconciles every chip's listed codes and judges it, as the monitor does once
a second. Rounds are timed on a quiet node, on one where four chips carry
faults that come and go (FaultFrequency and FaultDuration counting), and the
parse of the built-in ``faultCode.json`` and ``faultCustomization.json`` (what
a change of the ConfigMap costs) is timed too.
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from importlib import resources

from common import describe_ms, print_command

from ascend_plugin.fault_policy.config import base_config, fault_config
from ascend_plugin.fault_policy.customization import parse_customization
from ascend_plugin.fault_policy.fault_codes import parse_fault_codes
from ascend_plugin.fault_policy.policy import FaultPolicy

CHIPS = 16
FAULTS = (0x80E18402, 0x80E18005, 0x81078603, 0x80C98009, 0x80E21007)


class SteppedClock:
    """One second per round, so windows and timeouts move as on a node."""

    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


def rounds(
    policy: FaultPolicy, clock: SteppedClock, count: int, faulty: int, rng: random.Random
) -> list[float]:
    """Seconds per round of ``CHIPS`` reconciles and judgements; ``faulty`` chips see faults come and go."""
    timings = []
    listed: dict[int, set[int]] = {phy: set() for phy in range(CHIPS)}
    for _ in range(count):
        clock.now += 1
        for phy in range(faulty):
            if rng.random() < 0.05:
                listed[phy] ^= {rng.choice(FAULTS)}
        started = time.perf_counter()
        for phy in range(CHIPS):
            policy.reconcile(phy, listed[phy])
            policy.judge(phy)
        timings.append(time.perf_counter() - started)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5_000, help="health rounds per case")
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    logging.basicConfig(level=logging.ERROR)  # the escalations it logs are not the figures
    print_command()
    config = fault_config(base_config(None), None)
    for name, faulty in (("quiet node", 0), ("4 chips with faults coming and going", 4)):
        clock = SteppedClock()
        timings = rounds(FaultPolicy(config, clock), clock, args.rounds, faulty, rng)
        print(f"{CHIPS} chips, {name}")
        print("  " + describe_ms("reconcile + judge, all chips", timings))
    data = resources.files("ascend_plugin").joinpath("data")
    codes = data.joinpath("faultCode.json").read_text(encoding="utf-8")
    customization = data.joinpath("faultCustomization.json").read_text(encoding="utf-8")
    parses = []
    for _ in range(200):
        started = time.perf_counter()
        parse_fault_codes(codes, "built-in")
        parse_customization(customization, "built-in")
        parses.append(time.perf_counter() - started)
    print("  " + describe_ms("parse the built-in faultCode.json and faultCustomization.json", parses))


if __name__ == "__main__":
    main()
