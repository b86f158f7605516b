"""Hot reset is off unless asked for: a chip at a reset-level fault stays out until it is reset by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESOURCE, RESTART_NPU, levels_file, node_scenario
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.faces.kube.publishers import PUBLISHERS
from ascend_plugin.settings import Settings
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake.driver_state import DriverStateFile


def test_the_settings_default_to_off_and_a_minute_of_idle_time() -> None:
    settings = Settings(backend="fake", fake_scenario=Path("/s.json"), node_name="n")
    assert (settings.hot_reset, settings.hot_reset_idle) == (False, 60.0)
    assert not [
        publisher.name for publisher in PUBLISHERS if publisher.enabled(settings) and "hot" in publisher.name
    ]
    on = Settings(backend="fake", fake_scenario=Path("/s.json"), hot_reset="on", hot_reset_idle="0")
    assert (on.hot_reset, on.hot_reset_idle) == (True, 0.0)


def test_a_negative_idle_time_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="hot_reset_idle"):
        Settings(backend="fake", fake_scenario=Path("/s.json"), hot_reset_idle=-1)


@pytest.mark.anyio
async def test_without_hot_reset_a_faulty_chip_is_never_reset(
    any_fake: ScenarioPlayer[Any], kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    levels = levels_file(short_tmp)
    any_fake.update(node_scenario())
    settings = player_settings(any_fake, plugin_dir, short_tmp, fault_levels_file=levels)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        any_fake.update(node_scenario({0: RESTART_NPU}))
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend910-0")(k) == "Unhealthy", "chip 0 out")
        polls = app.metrics.calls.latency["read_health"].calls
        await until(lambda: app.metrics.calls.latency["read_health"].calls >= polls + 40, "40 more polls")
        assert app.hot_reset is None
        assert DriverStateFile.beside(any_fake.scenario_path).read().resets == ()
        assert b"ascend_hot_resets" not in app.metrics.render()
        assert health_of(RESOURCE, "Ascend910-0")(kubelet) == "Unhealthy"
