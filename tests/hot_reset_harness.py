"""A node whose chips hot reset: four 910B3 chips (one reset group), and a plugin with hot reset on.

The plugin runs in-process on either fake (the Python FakeLibrary, or the C
libdcmi.so through the real binding), with the kubelet stand-in and its
PodResources API, against the loopback API server. It runs in Volcano mode:
that is where the plugin knows which chips pods hold (a pod's
``huawei.com/AscendReal``), and a chip no one can say is free is never reset.
Its clock is :class:`MovingClock`, so a test can let hours pass for the reset
budget, and ``hot_reset_idle`` is 0 unless a test says otherwise. A test
starts once the plugin has read the node's ResetInfo annotation back (until
then it resets nothing).

The fault codes below are given their levels by the test's fault-level file.
What the driver did is read from the fakes' driver state: each chip's latest
reset, when it began and how many it had.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fake_apiserver import FakeApiServer
from fake_dcmi.players import ScenarioPlayer
from plugin_harness import player_settings, registered
from pod_resources_standin import PodResourcesStandIn
from volcano_harness import NODE, add_node_object, synced
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.fake.driver_state import DriverStateFile, Reset

RESOURCE = "huawei.com/Ascend910"
CHIPS = 4  # one 910B reset group (8 by logic id, here the node's 4)
RESTART_NPU = "80C98009"
FREE_RESTART_NPU = "80C9800A"
RESTART_BUSINESS = "80C9800B"
RESTART_REQUEST = "80C9800C"
PRE_SEPARATE_NPU = "80C9800D"
SEPARATE_NPU = "80E01801"
LEVELS = {
    "RestartNPU": [RESTART_NPU],
    "FreeRestartNPU": [FREE_RESTART_NPU],
    "RestartBusiness": [RESTART_BUSINESS],
    "RestartRequest": [RESTART_REQUEST],
    "PreSeparateNPU": [PRE_SEPARATE_NPU],
    "SeparateNPU": [SEPARATE_NPU],
}


def levels_file(directory: Path) -> Path:
    """A fault-level file giving the codes above their levels."""
    path = directory / "levels.json"
    path.write_text(json.dumps(LEVELS), encoding="utf-8")
    return path


def device(phy: int) -> str:
    return f"Ascend910-{phy}"


def node_scenario(
    faults: dict[int, str] | None = None,
    *,
    processes: dict[int, Sequence[int]] | None = None,
    chip: dict[int, dict[str, Any]] | None = None,
    reset_seconds: float = 0.3,
    **top: Any,
) -> FakeScenario:
    """Four 910B3 chips, one per card; ``faults``: chip -> the code it reports (with health 2).

    ``processes``: chip -> the PIDs on it; ``chip``: chip -> more of its fields; ``top``: the node's.
    """
    faults = faults or {}
    processes = processes or {}
    chip = chip or {}
    chips = [
        {
            "phy_id": phy,
            "card_id": phy,
            "health": 2 if phy in faults else 0,
            "fault_codes": [faults[phy]] if phy in faults else [],
            "processes": [{"pid": pid, "memory_bytes": 1 << 30} for pid in processes.get(phy, ())],
            **chip.get(phy, {}),
        }
        for phy in range(CHIPS)
    ]
    return FakeScenario.model_validate(
        {"chip_name": "910B3", "reset_seconds": reset_seconds, "chips": chips, **top}
    )


class MovingClock:
    """The monotonic clock, plus whatever time a test lets pass."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class ResetRig:
    """The running plugin, the fake it runs on, and what the test can see and move."""

    app: PluginApp
    player: ScenarioPlayer[Any]
    kubelet: KubeletStandIn
    apiserver: FakeApiServer
    pod_resources: PodResourcesStandIn
    clock: MovingClock

    @property
    def manager(self) -> HotResetManager:
        assert self.app.hot_reset is not None
        return self.app.hot_reset

    def write(self, scenario: FakeScenario) -> None:
        self.player.update(scenario)

    def resets(self) -> dict[int, Reset]:
        """Each chip's latest reset as the driver recorded it, by physical id."""
        state = DriverStateFile.beside(self.player.scenario_path).read()
        return {reset.phy_id: reset for reset in state.resets}

    def reset_count(self, phy: int) -> int:
        reset = self.resets().get(phy)
        return reset.count if reset is not None else 0

    def health(self, phy: int) -> str | None:
        return self.kubelet.health(RESOURCE).get(device(phy))

    def events(self) -> list[tuple[str, str, str]]:
        """The hot-reset Events on the Node, oldest first: (reason, type, message)."""
        ordered = sorted(self.apiserver.events(), key=lambda event: int(event["metadata"]["resourceVersion"]))
        return [
            (event["reason"], event["type"], event["message"])
            for event in ordered
            if event["reason"].startswith("HotReset")
        ]

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the plugin's clock, and have hot reset look again."""
        self.clock.advance(seconds)
        self.manager.wake()

    async def healthy(self, *phys: int) -> None:
        await wait_for(
            self.kubelet,
            lambda k: all(k.health(RESOURCE).get(device(phy)) == "Healthy" for phy in phys),
            f"{', '.join(device(phy) for phy in phys)} Healthy at the kubelet",
        )

    async def reset_done(self, phy: int, count: int = 1) -> None:
        """The driver had ``count`` resets of the chip, and the manager is done with the last."""
        await until(lambda: self.reset_count(phy) >= count, f"reset {count} of {device(phy)}")
        await until(lambda: not self.manager.active, "the reset to end")


@dataclass(frozen=True)
class RigParts:
    """What the plugin runs against: the kubelet and its PodResources, the API server, its directories."""

    kubelet: KubeletStandIn
    apiserver: FakeApiServer
    kubeconfig: Path
    pod_resources: PodResourcesStandIn
    plugin_dir: Path
    root: Path


@asynccontextmanager
async def reset_rig(
    player: ScenarioPlayer[Any],
    parts: RigParts,
    scenario: FakeScenario,
    *,
    resource: str = RESOURCE,
    **overrides: Any,
) -> AsyncIterator[ResetRig]:
    """The plugin with hot reset on ``scenario``, registered, following the node's pods, annotation read.

    ``resource``: the one the node's family registers.
    """
    levels = levels_file(parts.root)
    if parts.apiserver.get("nodes", NODE) is None:
        add_node_object(parts.apiserver)
    player.update(scenario)
    values: dict[str, Any] = {
        "node_name": NODE,
        "kubeconfig": parts.kubeconfig,
        "volcano": True,
        "pod_resources_socket": parts.pod_resources.socket,
        "host_ip": "198.51.100.7",
        "node_labels": False,
        "device_info_configmap": False,
        "node_events": False,
        "fault_levels_file": levels,
        "hot_reset": True,
        "hot_reset_idle": 0,
        "health_interval": 0.05,
    }
    values.update(overrides)
    settings = player_settings(player, parts.plugin_dir, parts.root, **values)
    clock = MovingClock()
    app = PluginApp(settings, clock=clock)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        try:
            await wait_for(parts.kubelet, registered(resource), "registration")
            await until(lambda: synced(app), "the pod cache")
            await until(lambda: app.hot_reset is not None and app.hot_reset.restored, "the annotation read")
            yield ResetRig(app, player, parts.kubelet, parts.apiserver, parts.pod_resources, clock)
        finally:
            app.stop()


async def polled_on(rig: ResetRig, more: int = 20) -> None:
    """Wait until the chips have been polled ``more`` times more: the manager had its chances to act."""
    latency = rig.app.metrics.calls.latency
    before = latency["read_health"].calls
    await until(lambda: latency["read_health"].calls >= before + more, f"{more} more health polls")
