"""The ``simulate`` timelines of split chips: ``--share-count N`` and ``--vnpu static``.

``--share-count N`` serves the Atlas 200I A2 of the default demo with its chip
offered N times, and allocates two shares to one container: the chip's node
comes once. ``--vnpu static`` serves an Atlas 300I Duo whose first chip is split
vir02 + vir02 + vir04: one resource per template beside the whole second chip,
an Allocate on each, then a vNPU destroyed in the scenario file and its
resource leaving the kubelet. With both, the plugin refuses to share a split
chip and exits with code 2, which the timeline shows.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ascend_plugin.app import PluginApp
from ascend_plugin.changes import first_change
from ascend_plugin.settings import Settings, SettingsError
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from ascend_plugin.testing.scenario_writer import write_scenario

TIMEOUT = 15.0
SHARED = "huawei.com/Ascend310"

_VIR02 = {"template": "vir02", "memory_mb": 6144}
_VIR04 = {"vdev_id": 102, "template": "vir04", "memory_mb": 12288}
DUO: dict[str, Any] = {
    "chip_name": "310P3",
    "memory_mb": 24576,
    "chips": [
        {"phy_id": 0, "card_id": 0, "vdevs": [_VIR02 | {"vdev_id": 100}, _VIR02 | {"vdev_id": 101}, _VIR04]},
        {"phy_id": 1, "card_id": 0},
    ],
}
# What a 300I Duo host exposes under /dev once its first chip is split.
DUO_NODES = (
    "davinci0", "davinci1", "vdavinci100", "vdavinci101", "vdavinci102", "davinci_manager", "hisi_hdc",
    "devmm_svm",
)  # fmt: skip


class Stage:
    """The kubelet stand-in and the narration of one timeline."""

    def __init__(self, kubelet: KubeletStandIn, out: Callable[[str], None]) -> None:
        self.kubelet = kubelet
        self.out = out
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.started:6.2f}s] {text}")

    async def wait(self, condition: Callable[[KubeletStandIn], bool], what: str) -> None:
        await anyio.to_thread.run_sync(self.kubelet.wait_until, condition, TIMEOUT, what)

    async def registered(self, resources: set[str]) -> None:
        """Wait until every resource named is registered with its devices listed."""
        await self.wait(
            lambda k: all(name in k.resources and k.resources[name].updates > 0 for name in resources),
            f"registration of {', '.join(sorted(resources))}",
        )

    async def allocate(self, resource: str, ids: list[str]) -> None:
        """Allocate ``ids`` for one container and say what it gets."""
        response = await anyio.to_thread.run_sync(self.kubelet.allocate, resource, ids)
        container = response.container_responses[0]
        self.say(f"Allocate {resource} [{', '.join(ids)}] ->")
        for spec in container.devices:
            self.say(f"    device {spec.host_path} -> {spec.container_path}")
        for name, value in sorted(container.envs.items()):
            self.say(f"    env    {name}={value}")

    def listing(self) -> None:
        """Every resource the node offers now, with its devices."""
        for resource in sorted(self.kubelet.node_capacity()):
            devices = self.kubelet.health(resource)
            self.say(f"  {resource}: {', '.join(f'{d} ({h})' for d, h in sorted(devices.items()))}")


async def _run(
    settings: Settings,
    kubelet: KubeletStandIn,
    out: Callable[[str], None],
    story: Callable[[Stage], Awaitable[None]],
) -> int:
    """Play ``story`` once the plugin registered; raise the SettingsError it refused to start with."""
    app = PluginApp(settings)
    stage = Stage(kubelet, out)
    stage.say(f"kubelet stand-in listening on {kubelet.socket}")
    refused: list[SettingsError] = []

    async def run_plugin() -> None:
        try:
            await app.run()
        except SettingsError as error:  # kept out of the task group; raised once the plugin stopped
            refused.append(error)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run_plugin)
        with anyio.fail_after(TIMEOUT):
            await first_change((app.registered, 0), (app.stop_requested, 0))  # registered, or refused
        if not app.stop_requested.version:
            await story(stage)
            app.stop()
    if refused:
        raise refused[0]
    await stage.wait(lambda k: not any(view.stream_open for view in k.resources.values()), "streams ended")
    left = sorted(path.name for path in kubelet.directory.glob("*.sock") if path.name != "kubelet.sock")
    stage.say(f"plugin stopped: every ListAndWatch stream ended; sockets left: {', '.join(left) or 'none'}")
    return 0


async def shares(
    settings: Settings, kubelet: KubeletStandIn, scenario: Path, out: Callable[[str], None]
) -> int:
    """An Atlas 200I A2 whose chip is offered ``share_count`` times."""
    count = settings.share_count

    async def story(stage: Stage) -> None:
        stage.say(f"fake node: one Ascend 310B1 (Atlas 200I A2), share_count={count}")
        await stage.registered({SHARED})
        stage.say(f"registered {SHARED}: the chip is offered {count} times")
        stage.listing()
        stage.say(
            "(sharing needs the driver's device-share mode: npu-smi set -t device-share -i 0 -c 0 -d 1)"
        )
        await stage.allocate(SHARED, ["Ascend310-0-0", "Ascend310-0-1"])
        stage.say("two shares of one chip: /dev/davinci0 once, then the shared nodes a whole chip gets")

    return await _run(settings, kubelet, out, story)


async def vnpus(
    settings: Settings, kubelet: KubeletStandIn, scenario: Path, out: Callable[[str], None]
) -> int:
    """An Atlas 300I Duo, its first chip split vir02 + vir02 + vir04, the second whole."""
    resources = {"huawei.com/Ascend310P", "huawei.com/Ascend310P-2c", "huawei.com/Ascend310P-4c"}

    async def story(stage: Stage) -> None:
        stage.say(
            "fake node: Atlas 300I Duo (two 310P3); chip 0 split into vNPUs 100, 101 (vir02), 102 (vir04)"
        )
        await stage.registered(resources)
        stage.say("registered one resource per template, each on its own socket, beside the whole chip 1:")
        stage.listing()
        await stage.allocate("huawei.com/Ascend310P-2c", ["Ascend310P-2c-100-0"])
        await stage.allocate("huawei.com/Ascend310P-4c", ["Ascend310P-4c-102-0"])
        await stage.allocate("huawei.com/Ascend310P", ["Ascend310P-1"])
        write_scenario(
            scenario,
            DUO | {"chips": [DUO["chips"][0] | {"vdevs": DUO["chips"][0]["vdevs"][:2]}, DUO["chips"][1]]},
        )
        stage.say("destroyed vNPU 102 (npu-smi set -t destroy-vnpu) in the scenario file")
        await stage.wait(lambda k: "huawei.com/Ascend310P-4c" not in k.node_capacity(), "4c gone")
        stage.say("huawei.com/Ascend310P-4c has no device left: its server stopped, the kubelet dropped it:")
        stage.listing()

    return await _run(settings, kubelet, out, story)
