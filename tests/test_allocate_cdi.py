"""CDI mode: a spec the runtime can read, and Allocate answers with CDI device names."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from log_records import records
from plugin_harness import FakeNode, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310P"

# The fields CDI defines at each level; a runtime rejects a spec with any other.
SPEC_KEYS = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
DEVICE_KEYS = {"name", "annotations", "containerEdits"}
EDIT_KEYS = {"env", "deviceNodes", "netDevices", "mounts", "hooks", "additionalGids", "intelRdt"}
NODE_KEYS = {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
MOUNT_KEYS = {"hostPath", "containerPath", "type", "options"}


def _check_edits(edits: dict[str, Any]) -> None:
    assert set(edits) <= EDIT_KEYS
    for node in edits.get("deviceNodes", []):
        assert set(node) <= NODE_KEYS
    for mount in edits.get("mounts", []):
        assert set(mount) <= MOUNT_KEYS


@pytest.fixture
def pair(node: FakeNode) -> FakeNode:
    node.write({"chip_name": "310P3", "chips": [{"phy_id": 4, "card_id": 2}, {"phy_id": 5, "card_id": 2}]})
    node.add_host_paths("/dev/davinci4", "/dev/davinci5", "/usr/local/Ascend/driver/version.info")
    return node


async def test_the_spec_describes_each_chip_and_the_shared_edits(
    kubelet: KubeletStandIn, pair: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    settings = pair.settings(plugin_dir, allocate_mode="cdi", cdi_spec_dir=short_tmp / "cdi")
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        response = await anyio.to_thread.run_sync(
            kubelet.allocate, RESOURCE, ["Ascend310P-5", "Ascend310P-4"]
        )
    spec = json.loads((short_tmp / "cdi" / "huawei.com-npu.json").read_text())
    assert set(spec) <= SPEC_KEYS
    # 0.5.0, the lowest its content allows (device names are digits, nodes have hostPath):
    # podman 4.3 and containerd before 1.7.12 refuse anything newer.
    assert (spec["cdiVersion"], spec["kind"]) == ("0.5.0", "huawei.com/npu")
    assert [device["name"] for device in spec["devices"]] == ["4", "5"]
    for device in spec["devices"]:
        assert set(device) <= DEVICE_KEYS
        _check_edits(device["containerEdits"])
        (chip_node,) = device["containerEdits"]["deviceNodes"]
        assert chip_node == {
            "path": f"/dev/davinci{device['name']}",
            "hostPath": f"/dev/davinci{device['name']}",
            "permissions": "rw",
        }
    _check_edits(spec["containerEdits"])
    shared = {node["hostPath"]: node["path"] for node in spec["containerEdits"]["deviceNodes"]}
    assert shared == {
        "/dev/davinci_manager": "/dev/davinci_manager",
        "/dev/hisi_hdc": "/dev/hisi_hdc",
        "/dev/devmm_svm": "/dev/devmm_svm",
    }
    assert spec["containerEdits"]["mounts"] == [
        {
            "hostPath": "/usr/local/Ascend/driver",
            "containerPath": "/usr/local/Ascend/driver",
            "options": ["ro", "nosuid", "nodev", "bind"],
        }
    ]

    container = response.container_responses[0]
    assert [device.name for device in container.cdi_devices] == ["huawei.com/npu=5", "huawei.com/npu=4"]
    assert dict(container.annotations) == {
        "cdi.k8s.io/ascend-device-plugin_Ascend310P-5": "huawei.com/npu=5,huawei.com/npu=4"
    }
    assert list(container.devices) == []


async def test_the_spec_version_follows_its_content(
    kubelet: KubeletStandIn, pair: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    """A dot in the kind's class is a 0.6.0 feature: the version written goes up with it."""
    settings = pair.settings(
        plugin_dir, allocate_mode="cdi", cdi_spec_dir=short_tmp / "cdi", cdi_kind="huawei.com/npu.v2"
    )
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration")
    spec = json.loads((short_tmp / "cdi" / "huawei.com-npu.v2.json").read_text())
    assert (spec["cdiVersion"], spec["kind"]) == ("0.6.0", "huawei.com/npu.v2")


async def test_an_unwritable_spec_directory_does_not_stop_the_plugin(
    kubelet: KubeletStandIn,
    pair: FakeNode,
    plugin_dir: Path,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = short_tmp / "not-a-directory"
    blocker.write_text("")
    settings = pair.settings(plugin_dir, allocate_mode="cdi", cdi_spec_dir=blocker / "cdi")
    async with running_plugin(settings):
        await wait_for(kubelet, registered(RESOURCE), "registration without a spec")
        assert kubelet.health(RESOURCE) == {"Ascend310P-4": "Healthy", "Ascend310P-5": "Healthy"}
    spec = f"{blocker}/cdi/huawei.com-npu.json"
    (failed,) = records(caplog, "ascend_plugin.handover.cdi", level=logging.ERROR, path=spec)
    # What to do about it: the runtime's directory to mount writable, or the setting to point elsewhere.
    assert "/var/run/cdi" in failed.getMessage()
    assert "cdi_spec_dir" in failed.getMessage()
