"""``dcmi_get_device_network_health`` as a second source of the RoCE link down, beside the fault codes.

Through the running health monitor on both fakes (``network_health`` in the
scenario's telemetry; the C fake's real binding). After a successful poll, at
most every ``network_interval``, the link is read once, as a background job with its own 1 s timeout: a result
other than OK (0) or INIT (6) puts ``81078603`` on the chip as a polled code,
OK or INIT lifts it. A call that fails or hangs says nothing: the last state
stays, and a hang (the call blocks after a card drop) holds up no verdict.
Families without a RoCE port (310, 310P, 310B) are never asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import Monitored, monitored, watching
from waiting import until

from ascend_plugin.inventory.monitor import HealthPolicy, health_policy
from ascend_plugin.settings import Settings
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

OK, INIT, FAULT, UNREACH = 0, 6, 5, 3
LINK_DOWN = "81078603"
SEPARATE = "80818C00"
FAST = HealthPolicy(interval=0.05, network_interval=0.05)


def _node(chip_name: str = "910B3", network: int = OK, **chip: object) -> FakeScenario:
    chips = [
        {"phy_id": 0, "card_id": 1, "telemetry": {"network_health": network}, **chip},
        {"phy_id": 1, "card_id": 2},
    ]
    return FakeScenario.model_validate({"chip_name": chip_name, "chips": chips})


def _network_codes(watched: Monitored, device: str) -> tuple[str, ...]:
    judgement = watched.device(device).judgement
    return () if judgement is None else judgement.network.codes[: judgement.network.current]


@pytest.mark.parametrize("down", [FAULT, UNREACH])
async def test_a_link_not_ok_is_the_link_down_code_and_ok_or_init_lifts_it(
    any_fake: ScenarioPlayer[Any], down: int
) -> None:
    with monitored(any_fake.open(_node()), policy=FAST) as watched:
        async with watching(watched):
            await until(lambda: watched.device("Ascend910-0").known, "the first verdict")
            any_fake.update(_node(network=down))
            await until(lambda: _network_codes(watched, "Ascend910-0") == (LINK_DOWN,), "the link down")
            assert watched.device("Ascend910-0").healthy  # the network's health is apart from the chip's
            assert _network_codes(watched, "Ascend910-1") == ()
            any_fake.update(_node(network=INIT))
            await until(lambda: _network_codes(watched, "Ascend910-0") == (), "the link up (INIT)")


async def test_a_hung_network_read_keeps_the_last_state_and_holds_up_no_verdict(
    any_fake: ScenarioPlayer[Any],
) -> None:
    with monitored(any_fake.open(_node(network=FAULT)), policy=FAST) as watched:
        timed_out: list[str] = []
        watched.calls.on_call_done(
            lambda name, _seconds, outcome: timed_out.append(name) if outcome == "timeout" else None
        )
        async with watching(watched):
            await until(lambda: _network_codes(watched, "Ascend910-0") == (LINK_DOWN,), "the link down")
            any_fake.update(_node(network=OK, hang=["network_health"]))
            await until(lambda: "network_status" in timed_out, "the network read given up after 1 s")
            # The call still hangs: the chip's polls go on, and a fault meanwhile is seen at the next poll.
            any_fake.update(_node(network=OK, hang=["network_health"], fault_codes=[SEPARATE]))
            await until(lambda: not watched.device("Ascend910-0").healthy, "the fault during the hang")
            assert watched.device("Ascend910-0").reason.startswith(f"fault {SEPARATE}:SeparateNPU")
            assert watched.calls.stuck(0) is None  # the hung call gave its thread up: the lane is free
            assert _network_codes(watched, "Ascend910-0") == (LINK_DOWN,)  # no news: the last state stays
            # The call returns once the hang ends: read again, the link is up.
            any_fake.update(_node(network=OK))
            await until(lambda: _network_codes(watched, "Ascend910-0") == (), "read again after the hang")
            await until(lambda: watched.device("Ascend910-0").healthy, "the fault gone too")


async def test_families_without_a_roce_port_are_never_asked(any_fake: ScenarioPlayer[Any]) -> None:
    with monitored(any_fake.open(_node("310P3", network=FAULT)), policy=FAST) as watched:
        calls: list[str] = []
        watched.calls.on_call_done(lambda name, _seconds, _outcome: calls.append(name))
        async with watching(watched):
            await until(lambda: calls.count("read_health") >= 8, "four polls of each chip")
        assert _network_codes(watched, "Ascend310P-0") == ()
        # One look per chip finds the family has no RoCE port (no driver call); never again.
        assert calls.count("network health") <= 2
        assert "network_status" not in calls


async def test_the_link_is_read_at_most_every_network_interval(any_fake: ScenarioPlayer[Any]) -> None:
    """Polls every 0.05 s, the link every hour: one read for many polls (each wakes the chip's thread)."""
    policy = HealthPolicy(interval=0.05, network_interval=3600.0)
    with monitored(any_fake.open(_node()), policy=policy) as watched:
        calls: list[str] = []
        watched.calls.on_call_done(lambda name, _seconds, _outcome: calls.append(name))
        async with watching(watched):
            await until(lambda: calls.count("read_health") >= 20, "ten polls of each chip")
        assert calls.count("network health") == 2, calls  # once for each chip, after its first poll


@pytest.mark.parametrize(("health_interval", "network_interval"), [(1.0, 5.0), (0.5, 5.0), (30.0, 30.0)])
def test_the_daemon_reads_the_link_every_5_s_or_every_poll_where_polls_are_rarer(
    health_interval: float, network_interval: float, tmp_path: Path
) -> None:
    settings = Settings(backend="fake", fake_scenario=tmp_path / "node.json", health_interval=health_interval)
    assert health_policy(settings).network_interval == network_interval
