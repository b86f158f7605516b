"""Shared chips (share_count): IDs, Allocate and health on 310B and 310P, through the real binding.

Each test runs the plugin in-process on the C fake libdcmi.so (the cffi path a
node takes), with the kubelet stand-in on the other side.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.players import CFakePlayer
from log_records import lines, records
from plugin_harness import player_settings, registered, running_plugin
from split_nodes import allocate, atlas_200i_a2, duo, make_host, node_paths, whole_chip_nodes
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.offers.node_offers import DEVICE_SHARE_NEEDED, SHARE_COUNT_IGNORED, SharingRefused
from ascend_plugin.settings import SettingsError
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.families import ASCEND_310B, ASCEND_310P

pytestmark = pytest.mark.anyio

NODES = {
    "atlas-200i-a2": (atlas_200i_a2(), "huawei.com/Ascend310", ASCEND_310B.family),
    "atlas-300i-duo": (duo({}), "huawei.com/Ascend310P", ASCEND_310P.family),
}


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(short_tmp / "host", "/dev/davinci0", "/dev/davinci1")


async def test_each_chip_of_an_atlas_200i_a2_is_offered_four_times(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(atlas_200i_a2())
    resource = "huawei.com/Ascend310"
    async with running_plugin(player_settings(c_fake, plugin_dir, host, share_count=4)):
        await wait_for(kubelet, registered(resource), "registration")
        assert kubelet.health(resource) == {f"Ascend310-0-{i}": "Healthy" for i in range(4)}
        container = await allocate(kubelet, resource, ["Ascend310-0-1", "Ascend310-0-3"])
    # The chip's own node once, however many of its shares, and exactly what a whole chip gets.
    paths = [host_path for host_path, _ in node_paths(container)]
    assert paths == whole_chip_nodes(c_fake, ASCEND_310B, host, 0)
    assert paths.count("/dev/davinci0") == 1
    assert ("/dev/davinci_manager_docker", "/dev/davinci_manager") in node_paths(container)
    assert [mount.host_path for mount in container.mounts] == ["/usr/local/Ascend/driver"]


async def test_a_300i_duo_offers_each_of_its_chips_four_times(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo({}))
    resource = "huawei.com/Ascend310P"
    async with running_plugin(player_settings(c_fake, plugin_dir, host, share_count=4)):
        await wait_for(kubelet, registered(resource), "registration")
        assert kubelet.health(resource) == {
            f"Ascend310P-{p}-{i}": "Healthy" for p in (0, 1) for i in range(4)
        }
        container = await allocate(kubelet, resource, ["Ascend310P-1-3"])
    paths = [host_path for host_path, _ in node_paths(container)]
    assert paths == whole_chip_nodes(c_fake, ASCEND_310P, host, 1)
    assert paths[0] == "/dev/davinci1"


@pytest.mark.parametrize("node", NODES)
async def test_runtime_mode_names_the_physical_chip(
    node: str, c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    scenario, resource, family = NODES[node]
    c_fake.update(scenario)
    prefix = resource.split("/")[1]
    settings = player_settings(c_fake, plugin_dir, host, share_count=2, allocate_mode="runtime")
    async with running_plugin(settings):
        await wait_for(kubelet, registered(resource), "registration")
        container = await allocate(kubelet, resource, [f"{prefix}-0-0", f"{prefix}-0-1"])
    assert container.envs["ASCEND_VISIBLE_DEVICES"] == "0"
    assert container.envs["ASCEND_RUNTIME_OPTIONS"] == ""
    assert ("ASCEND_ALLOW_LINK" in container.envs) == (family == "310B")
    assert container.devices == []


async def test_a_fault_turns_all_shares_of_its_chip_unhealthy_and_only_those(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo({}))
    resource = "huawei.com/Ascend310P"
    chip_0 = {f"Ascend310P-0-{i}" for i in range(3)}
    chip_1 = {f"Ascend310P-1-{i}" for i in range(3)}

    def healths(kubelet: KubeletStandIn, ids: set[str]) -> set[str]:
        return {health for device, health in kubelet.health(resource).items() if device in ids}

    async with running_plugin(player_settings(c_fake, plugin_dir, host, share_count=3)):
        await wait_for(kubelet, registered(resource), "registration")
        c_fake.update(duo({}, faults=[1]))
        await wait_for(kubelet, lambda k: healths(k, chip_1) == {"Unhealthy"}, "chip 1's shares unhealthy")
        assert healths(kubelet, chip_0) == {"Healthy"}
        c_fake.update(duo({}))
        await wait_for(kubelet, lambda k: healths(k, chip_1) == {"Healthy"}, "chip 1's shares back")
        assert healths(kubelet, chip_0) == {"Healthy"}


async def test_device_share_mode_is_named_once_with_the_command_per_chip(
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin.app")
    c_fake.update(duo({}))
    async with running_plugin(player_settings(c_fake, plugin_dir, host, share_count=2)):
        await wait_for(kubelet, registered("huawei.com/Ascend310P"), "registration")
    (hint,) = records(caplog, "ascend_plugin.app", level=logging.INFO, reason=DEVICE_SHARE_NEEDED)
    # The commands an operator runs on the host, one per chip.
    assert "npu-smi set -t device-share -i 0 -c 0 -d 1" in hint.getMessage()
    assert "npu-smi set -t device-share -i 0 -c 1 -d 1" in hint.getMessage()


IGNORING = {
    "910B3": (
        FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}, {"phy_id": 1}]}),
        "huawei.com/Ascend910",
        "Ascend910",
        "910",
    ),
    "310": (
        FakeScenario.model_validate({"chip_name": "310", "chips": [{"phy_id": 0}, {"phy_id": 1}]}),
        "huawei.com/Ascend310",
        "Ascend310",
        "310",
    ),
}


@pytest.mark.parametrize("chip_name", IGNORING)
async def test_families_that_do_not_share_ignore_the_setting_with_a_warning(
    chip_name: str,
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario, resource, prefix, family = IGNORING[chip_name]
    c_fake.update(scenario)
    async with running_plugin(player_settings(c_fake, plugin_dir, host, share_count=4)):
        await wait_for(kubelet, registered(resource), "registration")
        # Offered whole: one chart value across a mixed cluster never takes chips away.
        assert kubelet.health(resource) == {f"{prefix}-0": "Healthy", f"{prefix}-1": "Healthy"}
    (warning,) = records(caplog, "ascend_plugin.app", level=logging.WARNING, reason=SHARE_COUNT_IGNORED)
    # What is ignored, where it was set, which chips and family, and what they are offered as instead.
    message = warning.getMessage()
    for fact in ("--share-count 4", "ASCEND_DP_SHARE_COUNT=4", "Helm settings.shareCount: 4"):
        assert fact in message
    assert f"{prefix}-0, {prefix}-1 ({chip_name})" in message
    assert f"family {family}" in message
    assert resource in message


def test_sharing_a_chip_that_carries_vnpus_is_refused_with_exit_code_2(
    c_fake: CFakePlayer, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo())  # the Duo's first chip is split into three vNPUs
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ASCEND_", "NODE_NAME"))}
    command = [
        *(sys.executable, "-m", "ascend_plugin", "run", "--backend", "dcmi"),
        *("--dcmi-library", str(c_fake.library_path), "--dcmi-allow-untrusted-library"),
        *("--device-plugin-path", str(plugin_dir), "--host-root", str(host), "--http-address", ""),
        *("--share-count", "2", "--log-format", "json"),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    (refusal,) = lines(logged, "ascend_plugin.cli", level="ERROR")
    # Both settings that meet, where each is set, the chip and its vNPUs, and the way out.
    for fact in ("--share-count", "ASCEND_DP_SHARE_COUNT", "settings.shareCount", "vnpu=static"):
        assert fact in refusal["msg"]
    assert "100 (vir02), 101 (vir02), 102 (vir04) on Ascend310P-0 (310P3)" in refusal["msg"]
    assert (
        "share_count=1 (--share-count 1, ASCEND_DP_SHARE_COUNT=1, Helm settings.shareCount: 1)"
        in (refusal["msg"])
    )
    assert not list(plugin_dir.iterdir()), "nothing served, nothing left behind"


async def test_the_ignored_setting_is_also_a_warning_event_on_the_node(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    c_fake: CFakePlayer,
    kubelet: KubeletStandIn,
    plugin_dir: Path,
    host: Path,
) -> None:
    apiserver.add_node("npu-node-1")
    scenario, resource, _, _ = IGNORING["910B3"]
    c_fake.update(scenario)
    settings = player_settings(
        c_fake, plugin_dir, host, share_count=4, node_name="npu-node-1", kubeconfig=kubeconfig
    )
    async with running_plugin(settings):
        await wait_for(kubelet, registered(resource), "registration")
        await until(
            lambda: any(event["reason"] == "ShareCountIgnored" for event in apiserver.events()), "the event"
        )
    (event,) = [event for event in apiserver.events() if event["reason"] == "ShareCountIgnored"]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "npu-node-1"
    assert event["message"].startswith("share_count=4 (--share-count 4, ASCEND_DP_SHARE_COUNT=4")
    assert "of family 910, whose driver does not share a chip; only 310P, 310B do" in event["message"]


async def test_the_plugin_stops_cleanly_and_raises_the_refusal_a_settings_error(
    c_fake: CFakePlayer, plugin_dir: Path, host: Path
) -> None:
    """What the command turns into exit code 2, as it does for invalid settings."""
    c_fake.update(duo())
    app = PluginApp(player_settings(c_fake, plugin_dir, host, share_count=2))
    with pytest.raises(SharingRefused) as refused:
        await app.run()
    assert isinstance(refused.value, SettingsError)
    assert "would share chips that carry vNPUs" in refused.value.args[0]
    assert not app.lock.held
    assert not list(plugin_dir.glob("*.sock")), "nothing served, nothing left behind"  # noqa: ASYNC240
