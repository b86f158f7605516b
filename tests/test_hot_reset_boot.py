"""A chip whose hot reset timed out stays out until it has booted, and a reset under way is shown.

After a reset the driver may answer health 0 from a chip that has not
finished booting (boot status short of 16): offered then, it would be handed
to a pod that fails on it. So when the boot wait times out, the chips that
booted go back and the others stay out, named for an operator, until their
boot status says 16. Meanwhile /readyz and the metric ``ascend_hot_reset_in_progress``
say which chips a reset has out, and why.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESOURCE, RESTART_NPU, RigParts, device, node_scenario, polled_on, reset_rig
from volcano_harness import NODE
from waiting import until

from ascend_plugin.hot_reset.sequence import BOOT_TIMEOUT
from ascend_plugin.hot_reset.stats import Result

pytestmark = pytest.mark.anyio


def manual(apiserver: FakeApiServer) -> list[int]:
    """The physical ids in the node's ResetInfo annotation (ManualResetDevs)."""
    node = apiserver.get("nodes", NODE)
    assert node is not None
    text = (node["metadata"].get("annotations") or {}).get("ResetInfo")
    return [entry["PhyID"] for entry in json.loads(text)["ManualResetDevs"]] if text else []


def in_progress_metric(text: str) -> list[str]:
    """The devices ``ascend_hot_reset_in_progress`` names, in a scrape's text."""
    return [
        line.split('device="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("ascend_hot_reset_in_progress{")
    ]


async def test_a_chip_that_reads_health_0_but_has_not_booted_stays_out_until_it_has(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    apiserver = reset_parts.apiserver
    # The reset mends chip 1 (health 0, no codes), but its boot status never says it finished.
    never_booted = node_scenario({1: RESTART_NPU}, chip={1: {"errors": {"boot_status": -8012}}})
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        rig.write(never_booted)
        await until(lambda: rig.reset_count(1) == 1, "the reset of chip 1")
        history = rig.kubelet.resources[RESOURCE].history
        seen = len(history)  # what the kubelet was sent from the reset on
        await until(
            lambda: (
                "hot reset of Ascend910-1" in (said := rig.app.readiness().detail)
                and "waiting for its group to boot" in said
            ),
            "/readyz says the reset waits for the boot",
        )
        assert in_progress_metric(rig.app.metrics.render().decode()) == [device(p) for p in range(4)]
        rig.advance(BOOT_TIMEOUT)
        await until(lambda: manual(apiserver) == [1], "chip 1 named for an operator")
        assert rig.manager.stats.results == {Result.TIMEOUT: 1}
        await rig.healthy(0, 2, 3)

        await polled_on(rig)  # chip 1 reads health 0 all along
        assert rig.health(1) == "Unhealthy"
        assert manual(apiserver) == [1]
        sent = [devices["Ascend910-1"] for _, devices in list(history)[seen:]]
        assert "Healthy" not in sent, "never offered again before it booted"
        detail = rig.app.readiness().detail
        assert "Ascend910-1 out until they finish booting" in detail
        assert in_progress_metric(rig.app.metrics.render().decode()) == ["Ascend910-1"]

        rig.write(node_scenario())  # its boot status answers 16 now
        await rig.healthy(0, 1, 2, 3)
        await until(lambda: manual(apiserver) == [], "off the annotation once healthy")
        assert rig.manager.in_progress() == []
        assert in_progress_metric(rig.app.metrics.render().decode()) == []
        assert "hot reset" not in rig.app.readiness().detail
