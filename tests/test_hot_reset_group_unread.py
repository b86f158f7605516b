"""A reset group the driver cannot give is said once, asked for again with backoff, and the reset follows.

The chip is an A3 die: its group needs the driver to name the brother card,
and the fake's ``dcmi_get_netdev_brother_device`` hangs, so every ask fails
(the first by its timeout, the next ones on the chip's lane, stuck since).
The manager is woken again and again, its clock moved past each backoff: the
warning is said once, the repeats at DEBUG.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESTART_NPU, RigParts, node_scenario, reset_rig
from log_records import records
from waiting import until

from ascend_plugin.hot_reset.manager import GROUP_BACKOFF

pytestmark = pytest.mark.anyio

MANAGER = "ascend_plugin.hot_reset.manager"
A3 = {"chip_name": "Ascend910"}


def asks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The lines saying chip 0's reset group cannot be read, at any level."""
    return [
        record
        for record in records(caplog, MANAGER, device="Ascend910-0")
        if "the reset group of chip 0" in record.getMessage() and "cannot be read" in record.getMessage()
    ]


async def test_a_reset_group_that_cannot_be_read_is_said_once_and_asked_again_with_backoff(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, MANAGER)
    async with reset_rig(python_fake, reset_parts, node_scenario(**A3), dcmi_call_timeout=0.2) as rig:
        rig.write(node_scenario({0: RESTART_NPU}, chip={0: {"hang": ["brother_card"]}}, **A3))
        try:
            await until(lambda: len(asks(caplog)) >= 1, "the first ask failed")
            for seen in range(1, 5):
                assert len(asks(caplog)) == seen, "not asked again before its backoff is up"
                rig.advance(GROUP_BACKOFF.cap)
                await until(lambda n=seen: len(asks(caplog)) > n, f"ask {seen + 1} failed")
            said = asks(caplog)
            levels = [record.levelno for record in said]
            assert levels == [logging.WARNING] + [logging.DEBUG] * (len(levels) - 1)
            assert said[0].getMessage().endswith(f"; retrying in {GROUP_BACKOFF.first:.1f} s")
            assert rig.reset_count(0) == 0
        finally:
            rig.write(node_scenario({0: RESTART_NPU}, **A3))  # the driver answers again
        await until(lambda: rig.app.calls.stuck(0) is None, "chip 0's lane free again")
        rig.advance(GROUP_BACKOFF.cap)
        await rig.reset_done(0)
    (read,) = [r for r in records(caplog, MANAGER, level=logging.INFO) if "is read after" in r.getMessage()]
    assert read.getMessage().endswith(f"is read after {len(asks(caplog))} failed attempt(s)")
