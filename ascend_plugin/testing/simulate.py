"""``ascend-device-plugin simulate``: the whole plugin on a fake Atlas 200I A2, narrated.

Everything runs for real except the hardware and the kubelet (the grpcio stand-in): registration, an
Allocate, a fault in the scenario file, a kubelet restart, as the kubelet sees them; then placement on a
node of two Atlas 300I cards. ``--share-count`` and ``--vnpu static`` play other timelines
(:mod:`.simulate_splits`).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ascend_plugin.app import PluginApp
from ascend_plugin.fault_policy.config import builtin_codes
from ascend_plugin.fault_policy.faults import parse_code
from ascend_plugin.settings import Settings, describe_validation_error
from ascend_plugin.testing.scenario_writer import write_scenario

RESOURCE = "huawei.com/Ascend310"
DEVICE = "Ascend310-0"
TIMEOUT = 15.0
FAULT = "80E01801"  # HBM multi-bit error


def built_in_level(code: str) -> str:
    """The level Huawei's built-in faultCode.json gives ``code``: the demo names what the plugin applies."""
    parsed = parse_code(code)
    level = builtin_codes().list_level(parsed) if parsed is not None else None
    return level.name if level is not None else "not in faultCode.json"


# What an Atlas 200I A2 board exposes under /dev (a subset is enough to show the rules).
HOST_DEVICE_NODES = (
    "davinci0", "davinci_manager", "davinci_manager_docker", "hisi_hdc", "devmm_svm",
    "svm0", "ts_aisle", "upgrade", "sys", "vdec", "vpc", "venc", "pngd", "log_drv",
)  # fmt: skip


def _scenario(fault_codes: list[str]) -> dict[str, Any]:
    return {
        "chip_name": "310B1",
        "aicore": 1.0,
        "memory_mb": 4096,
        "chips": [{"phy_id": 0, "card_id": 0, "device_id": 0, "health": 0, "fault_codes": fault_codes}],
    }


def simulate(
    out: Callable[[str], None] = print,
    share_count: int = 1,
    vnpu: Literal["static", "off"] = "off",
    family: Literal["310B", "950"] = "310B",
) -> int:
    """Run the demo; return 0 when every step happened as expected.

    ``share_count`` > 1 shares the board's chip; ``vnpu="static"`` plays a 300I Duo split into vNPUs;
    ``family="950"`` an Atlas 850 served through DCMI v2 (:mod:`.simulate_950`).
    """
    try:
        from ascend_plugin.testing.kubelet_standin import KubeletStandIn
    except ImportError:
        out("simulate needs grpcio for its kubelet stand-in: pip install 'ascend-device-plugin[demo]'")
        return 1
    from ascend_plugin.testing import simulate_950, simulate_splits

    scenario_of: dict[str, Any]
    prepare: Callable[[Path], None]
    if family == "950":
        scenario_of, prepare = simulate_950.ATLAS_850, simulate_950.prepare_host
        timeline = simulate_950.timeline
    elif vnpu == "static":
        scenario_of, timeline = simulate_splits.DUO, simulate_splits.vnpus
        prepare = functools.partial(_prepare_host, device_nodes=simulate_splits.DUO_NODES)
    else:
        scenario_of, prepare = _scenario([]), _prepare_host
        timeline = simulate_splits.shares if share_count > 1 else _timeline
    with tempfile.TemporaryDirectory(prefix="ascend-simulate-") as tmp:
        root = Path(tmp)
        plugin_dir = root / "device-plugins"
        host = root / "host"
        prepare(host)
        scenario = root / "node.json"
        write_scenario(scenario, scenario_of)
        kubelet = KubeletStandIn(plugin_dir)
        kubelet.start()
        try:
            settings = _settings(scenario, plugin_dir, host, "device", share_count=share_count, vnpu=vnpu)
            code: int = anyio.run(timeline, settings, kubelet, scenario, out)
            if code != 0:
                return code
        except ValidationError as error:
            out(describe_validation_error(error))
            return 2
        finally:
            kubelet.stop()
        # The default demo goes on to a second node, where placement shows.
        return _placement(root / "cards", out) if timeline is _timeline else 0


def _prepare_host(host: Path, device_nodes: tuple[str, ...] = HOST_DEVICE_NODES) -> None:
    """The fake host's /dev nodes and driver directory."""
    (host / "dev").mkdir(parents=True)
    for node in device_nodes:
        (host / "dev" / node).touch()
    (host / "usr/local/Ascend/driver").mkdir(parents=True)


def _settings(
    scenario: Path, plugin_dir: Path, host: Path, mode: Literal["device", "runtime"], **extra: Any
) -> Settings:
    """A plugin on the fake backend, as the demo runs it."""
    return Settings(
        backend="fake",
        fake_scenario=scenario,
        device_plugin_path=plugin_dir,
        host_root=host,
        allocate_mode=mode,
        health_interval=0.2,
        log_level="WARNING",
        **extra,
    )


# Two Atlas 300I cards (four Ascend 310 each) in PCIe slots 5 and 9.
CARDS_NODE = {"chip_name": "310", "chips": [{"phy_id": p, "card_id": 5 if p < 4 else 9} for p in range(8)]}
CARDS_RESOURCE = "huawei.com/Ascend310"


def _placement(root: Path, out: Callable[[str], None]) -> int:
    """A second node: the kubelet asks where a 2-chip pod should go, and gets one card's chips."""
    from ascend_plugin.testing.kubelet_standin import KubeletStandIn

    root.mkdir()
    scenario = root / "node.json"
    write_scenario(scenario, CARDS_NODE)
    kubelet = KubeletStandIn(root / "device-plugins")
    kubelet.start()
    try:
        settings = _settings(scenario, root / "device-plugins", root, "runtime")
        return anyio.run(_ask_for_two, settings, kubelet, out)
    finally:
        kubelet.stop()


async def _ask_for_two(settings: Settings, kubelet: Any, out: Callable[[str], None]) -> int:
    app = PluginApp(settings)
    out("")
    out("second node: two Atlas 300I cards, Ascend310-0..3 on the card in slot 5, -4..7 in slot 9")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)

        def registered(k: Any) -> bool:
            return CARDS_RESOURCE in k.resources and k.resources[CARDS_RESOURCE].updates > 0

        await anyio.to_thread.run_sync(kubelet.wait_until, registered, TIMEOUT, "registration")
        available = [f"Ascend310-{phy}" for phy in range(1, 8)]
        out("Ascend310-0 is in use; a pod asks for 2 NPUs (GetPreferredAllocation over the 7 free)")
        chosen = await anyio.to_thread.run_sync(
            kubelet.preferred_allocation, CARDS_RESOURCE, available, [], 2
        )
        cards = sorted({5 if int(device.rsplit("-", 1)[1]) < 4 else 9 for device in chosen})
        where = f"both on the card in slot {cards[0]}" if len(cards) == 1 else f"on the slots {cards}"
        out(f"the plugin prefers {', '.join(chosen)}: {where}")
        response = await anyio.to_thread.run_sync(kubelet.allocate, CARDS_RESOURCE, chosen)
        envs = dict(response.container_responses[0].envs)
        out(f"the kubelet stand-in was given {', '.join(chosen)}: {envs}")
        app.stop()
    return 0 if len(cards) == 1 else 1


async def _timeline(settings: Settings, kubelet: Any, scenario: Path, out: Callable[[str], None]) -> int:
    from ascend_plugin.testing.simulate_splits import Stage

    stage = Stage(kubelet, out)
    say, wait = stage.say, stage.wait
    app = PluginApp(settings)
    say(f"kubelet stand-in listening on {kubelet.socket}")
    say("fake node: one Ascend 310B1 (Atlas 200I A2), computing.aic = 1.0")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        await wait(lambda k: RESOURCE in k.resources and k.resources[RESOURCE].updates > 0, "registration")
        view = kubelet.resources[RESOURCE]
        say(f"registered {RESOURCE} on endpoint {view.endpoint}")
        say("the chip's 1 AI core is within the 310B family's bounds [1, 1]: no exit, no warning")
        say(f"devices: {kubelet.health(RESOURCE)}  capacity={view.capacity} allocatable={view.allocatable}")

        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, [DEVICE])
        container = response.container_responses[0]
        say(f"Allocate [{DEVICE}] ->")
        for spec in container.devices:
            say(f"    device {spec.host_path} -> {spec.container_path} ({spec.permissions})")
        for mount in container.mounts:
            say(f"    mount  {mount.host_path} (read-only={mount.read_only})")

        write_scenario(scenario, _scenario([FAULT]))
        say(f"injected fault {FAULT} ({built_in_level(FAULT)}) into the scenario file")
        await wait(lambda k: k.health(RESOURCE).get(DEVICE) == "Unhealthy", "device unhealthy")
        say(f"kubelet sees {DEVICE} Unhealthy, allocatable={kubelet.resources[RESOURCE].allocatable}")

        write_scenario(scenario, _scenario([]))
        say("cleared the fault")
        await wait(lambda k: k.health(RESOURCE).get(DEVICE) == "Healthy", "device healthy again")
        say(f"kubelet sees {DEVICE} Healthy again, allocatable={kubelet.resources[RESOURCE].allocatable}")

        before = len(kubelet.registrations)
        restart = await anyio.to_thread.run_sync(kubelet.restart)
        say(
            f"kubelet restarted: deleted {', '.join(restart.deleted_sockets)}; "
            f"new kubelet.sock {'reused' if restart.same_inode else 'did not reuse'} the old inode number"
        )
        await wait(
            lambda k: len(k.registrations) > before and k.resources[RESOURCE].updates > 0, "re-registration"
        )
        latency = kubelet.registrations[-1].at - restart.at
        say(f"re-registered {latency * 1000:.0f} ms after the restart; devices: {kubelet.health(RESOURCE)}")

        app.stop()
    await wait(lambda k: not k.resources[RESOURCE].stream_open, "stream closed")
    say(f"plugin stopped: ListAndWatch ended with {kubelet.resources[RESOURCE].stream_end}, socket removed")
    return 0
