"""A new fault configuration applies to the running plugin without a restart, and without waiting for a poll.

The plugin's own parts hand their input to
:class:`~ascend_plugin.fault_policy.policy.FaultSources` (here the config
ConfigMap's ``fault_levels.json``, as :class:`ConfigWatcher` does, and Huawei's
``mindx-dl-fault-config``); the policy swaps to the new configuration and wakes
the health monitor, so the kubelet sees the new verdict at once though the
polls are an hour apart. Taking the input back restores the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import wait_for

from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
CODE = 0x80E21007  # NotHandleFault in Huawei's faultCode.json
HEALTH = health_of(RESOURCE, "Ascend910-1")


def _node() -> FakeScenario:
    chips = [
        {"phy_id": n, "card_id": n + 1, "fault_codes": [f"{CODE:08X}"] if n == 1 else []} for n in range(2)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


async def test_a_new_fault_configuration_applies_without_a_restart(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    any_fake.update(_node())
    async with running_plugin(player_settings(any_fake, plugin_dir, short_tmp, health_interval=3600)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert HEALTH(kubelet) == "Healthy"

        app.faults.set_overlay({CODE: FaultLevel.SeparateNPU}, "fault_levels.json of the test")
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "the overlay applied")
        assert app.inventory is not None
        assert app.inventory.chips()[1].health.reason == "fault 80E21007:SeparateNPU"
        app.faults.set_overlay({}, None)
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "the overlay taken back")

        app.faults.set_configmap({"faultCode.json": json.dumps({"RestartNPUCodes": ["80E21007"]})})
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "Huawei's ConfigMap applied")
        assert app.inventory.chips()[1].health.worst_level is FaultLevel.RestartNPU
        app.faults.set_configmap(None)  # the ConfigMap deleted: the built-in lists again
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "the built-in lists again")
