"""``ascend-device-plugin simulate --serve dra``: the DRA driver on a fake Atlas 800T A2, narrated.

Everything runs for real except the hardware, the kubelet (the DRA stand-in, on grpcio) and the API
server (the loopback stand-in, reached through the real Kubernetes client).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ascend_plugin.app import PluginApp
from ascend_plugin.settings import Settings
from ascend_plugin.testing.scenario_writer import write_scenario
from ascend_plugin.testing.simulate import FAULT, built_in_level

DRIVER = "npu.huawei.com"
NODE = "atlas-800t-a2"
TIMEOUT = 20.0


def server_scenario(faults: dict[int, list[str]]) -> dict[str, Any]:
    """The fake server of the demo and bench/dra.py: eight 910B3, ``faults`` by physical ID."""
    return {
        "chip_name": "910B3",
        "aicore": 20.0,
        "memory_mb": 65536,
        "chips": [
            {
                "phy_id": phy,
                "card_id": phy,
                "pcie": f"0000:{0xC1 + phy:02x}:00.0",
                "fault_codes": faults.get(phy, []),
            }
            for phy in range(8)
        ],
    }


def simulate_dra(out: Callable[[str], None] = print) -> int:
    """Run the DRA demo; return 0 when every step happened as expected."""
    from ascend_plugin.testing.kube_apiserver import FakeApiServer

    with tempfile.TemporaryDirectory(prefix="ascend-dra-") as tmp:
        return anyio.run(_run, Path(tmp), FakeApiServer, out)


async def _run(root: Path, server_class: Any, out: Callable[[str], None]) -> int:
    from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi

    host = root / "host"
    for node in ("davinci_manager", "hisi_hdc", "devmm_svm", *(f"davinci{phy}" for phy in range(8))):
        (host / "dev").mkdir(parents=True, exist_ok=True)
        (host / "dev" / node).touch()
    (host / "usr/local/Ascend/driver").mkdir(parents=True)
    scenario = root / "node.json"
    write_scenario(scenario, server_scenario({}))
    async with server_class() as apiserver:
        apiserver.add_node(NODE)
        kubelet = DraKubeletStandIn(
            root / "plugins_registry", NODE, KubeletApi(apiserver.url, apiserver.token), health_retry=0.2
        )
        await anyio.to_thread.run_sync(kubelet.start)
        try:
            settings = Settings(
                backend="fake",
                fake_scenario=scenario,
                serve="dra",
                node_name=NODE,
                kubeconfig=apiserver.write_kubeconfig(root / "kubeconfig"),
                dra_registry_path=root / "plugins_registry",
                dra_plugin_path=root / "plugins" / DRIVER,
                cdi_spec_dir=root / "cdi",
                host_root=host,
                health_interval=0.2,
                http_address="",
                node_labels=False,
                device_info_configmap=False,
                node_events=False,
                log_level="WARNING",
            )
            return await _Timeline(settings, kubelet, apiserver, scenario, out).run()
        finally:
            await anyio.to_thread.run_sync(kubelet.stop)


class _Timeline:
    """The demo's steps, each saying what the kubelet and the API server see."""

    def __init__(
        self, settings: Settings, kubelet: Any, apiserver: Any, scenario: Path, out: Callable[[str], None]
    ):
        self.settings = settings
        self.kubelet = kubelet
        self.apiserver = apiserver
        self.scenario = scenario
        self.out = out
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.started:6.2f}s] {text}")

    async def kubelet_sees(self, condition: Callable[[Any], bool], what: str) -> None:
        await anyio.to_thread.run_sync(self.kubelet.wait_until, condition, TIMEOUT, what)

    async def api_has(self, condition: Callable[[], bool], what: str) -> None:
        with anyio.move_on_after(TIMEOUT) as scope:
            while not condition():  # noqa: ASYNC110 - the fake API server's state, no event to wait on
                await anyio.sleep(0.01)
        if scope.cancelled_caught:
            raise TimeoutError(f"API server: not within {TIMEOUT:g} s: {what}")

    def devices(self) -> list[dict[str, Any]]:
        return [device for s in self.apiserver.slices(DRIVER, NODE) for device in s["spec"]["devices"]]

    def generation(self) -> int:
        value: int = self.apiserver.slices(DRIVER, NODE)[0]["spec"]["pool"]["generation"]
        return value

    async def run(self) -> int:
        app = PluginApp(self.settings)
        self.say(
            f"fake API server at {self.apiserver.url}, node {NODE}; DRA kubelet stand-in on "
            f"{self.kubelet.registry_dir}"
        )
        self.say("fake node: eight 910B3 (Atlas 800T A2) in one full mesh, 64 GiB HBM each")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(app.run)
            await self.registered_and_published()
            ref = await self.claim_prepared()
            if ref is None:
                app.stop()
                return 1
            await self.fault_and_recovery()
            await self.kubelet_restart()
            done = await anyio.to_thread.run_sync(self.kubelet.unprepare, DRIVER, [ref])
            left = sorted(path.name for path in self.settings.cdi_spec_dir.glob("*.json"))
            self.say(
                f"NodeUnprepareResources -> error={done.claims[ref[2]].error!r}; "
                f"CDI specs left: {left or 'none'}"
            )
            app.stop()
        self.say(
            "driver stopped: registration and DRA sockets removed; the kubelet wipes the slices 30 s later"
        )
        return 0

    async def registered_and_published(self) -> None:
        await self.kubelet_sees(lambda k: DRIVER in k.drivers, "registration")
        view = self.kubelet.drivers[DRIVER]
        self.say(
            f"registered DRA driver {DRIVER}: endpoint {view.endpoint}, the kubelet chose {view.service}"
        )
        await self.api_has(lambda: len(self.devices()) == 8, "the ResourceSlice")
        (slice_,) = self.apiserver.slices(DRIVER, NODE)
        first = slice_["spec"]["devices"][0]
        self.say(
            f"ResourceSlice {slice_['metadata']['name']}: pool {NODE}, "
            f"generation {self.generation()}, 8 devices"
        )
        attributes = ", ".join(
            f"{name}={next(iter(value.values()))}" for name, value in first["attributes"].items()
        )
        self.say(f"    {first['name']}: {attributes}")
        self.say(f"    capacity memory={first['capacity']['memory']['value']}")

    async def claim_prepared(self) -> tuple[str, str, str] | None:
        results = [
            {"request": "npus", "driver": DRIVER, "pool": NODE, "device": d} for d in ("npu-2", "npu-3")
        ]
        claim = self.apiserver.put(
            "resourceclaims",
            {
                "metadata": {"name": "train-job", "namespace": "default"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "npus", "exactly": {"deviceClassName": f"ascend910.{DRIVER}"}}]
                    }
                },
                "status": {"allocation": {"devices": {"results": results}}},
            },
        )
        ref = ("default", "train-job", claim["metadata"]["uid"])
        self.say("the scheduler allocated npu-2 and npu-3 to ResourceClaim default/train-job")
        answer = await anyio.to_thread.run_sync(self.kubelet.prepare, DRIVER, [ref])
        prepared = answer.claims[ref[2]]
        if prepared.error:
            self.say(f"NodePrepareResources failed: {prepared.error}")
            return None
        self.say("NodePrepareResources ->")
        for device in prepared.devices:
            self.say(
                f"    {device.device_name} for {','.join(device.request_names)}: "
                f"{', '.join(device.cdi_device_ids)}"
            )
        spec_files = sorted(path.name for path in self.settings.cdi_spec_dir.glob("*.json"))
        self.say(f"CDI spec written: {', '.join(spec_files)}")
        again = await anyio.to_thread.run_sync(self.kubelet.prepare, DRIVER, [ref])
        self.say(f"prepared again: the same answer from the checkpoint ({bytes(again) == bytes(answer)})")
        return ref

    async def fault_and_recovery(self) -> None:
        before = self.generation()
        write_scenario(self.scenario, server_scenario({5: [FAULT]}))
        self.say(f"injected fault {FAULT} ({built_in_level(FAULT)}) on chip 5")
        await self.api_has(
            lambda: "npu-5" not in {d["name"] for d in self.devices()}, "npu-5 out of the slice"
        )
        self.say(
            f"npu-5 left the slice: generation {before} -> {self.generation()}, {len(self.devices())} devices"
        )

        def unhealthy(kubelet: Any) -> bool:
            # The health stream may not have sent its first list yet: no report is not unhealthy.
            report = kubelet.drivers[DRIVER].health.get((NODE, "npu-5"))
            return report is not None and bool(report.health == "UNHEALTHY")

        await self.kubelet_sees(unhealthy, "npu-5 reported unhealthy")
        report = self.kubelet.drivers[DRIVER].health[(NODE, "npu-5")]
        self.say(f"health stream: npu-5 UNHEALTHY ({report.message})")
        write_scenario(self.scenario, server_scenario({}))
        await self.api_has(lambda: len(self.devices()) == 8, "npu-5 back")
        self.say(f"cleared the fault: npu-5 is back, generation {self.generation()}")

    async def kubelet_restart(self) -> None:
        registrations = len(self.kubelet.registrations)
        await anyio.to_thread.run_sync(self.kubelet.restart)
        self.say("kubelet restarted: it wiped the node's ResourceSlices and scans its plugin registry again")
        await self.kubelet_sees(lambda k: len(k.registrations) > registrations, "registration again")
        await self.api_has(lambda: len(self.devices()) == 8, "the slice back")
        self.say(
            "registered again; the slice is back: "
            f"{self.apiserver.slices(DRIVER, NODE)[0]['metadata']['name']}"
        )
