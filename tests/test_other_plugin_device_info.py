"""Another process rewriting the device-info ConfigMap (Huawei's plugin still on the node): named, not fought.

The publisher writes to the loopback API server through the real client; the
other writer's versions are put there as a second plugin's writes would land
(another device list, its own field manager). The publisher says so once, in
the log and as a node Event, writes nothing while the other keeps writing, and
writes again once the other has been quiet for FOREIGN_QUIET seconds (its clock
is the test's).
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import make_inventory, running
from waiting import until

from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher
from ascend_plugin.kubeapi.client import Kube
from ascend_plugin.other_plugins import FOREIGN_QUIET

pytestmark = pytest.mark.anyio

NAMESPACE, NAME = "kube-system", "mindx-dl-deviceinfo-npu-node-1"


def our_writes(apiserver: FakeApiServer) -> int:
    return sum(
        1
        for request in apiserver.requests
        if request.resource == "configmaps" and request.verb in ("create", "update") and request.status < 300
    )


def written_by_another(apiserver: FakeApiServer, free: str, manager: str = "device-plugin") -> dict[str, Any]:
    """The stored ConfigMap rewritten by another process: another device list, its field manager."""
    stored = apiserver.get("configmaps", NAME, NAMESPACE)
    assert stored is not None
    other = copy.deepcopy(stored)
    listed = json.loads(other["data"]["DeviceInfoCfg"])
    listed["DeviceInfo"]["DeviceList"]["huawei.com/Ascend910"] = free
    other["data"]["DeviceInfoCfg"] = json.dumps(listed)
    other["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Update", "time": "2026-11-02T10:00:00Z"},
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-01T10:00:00Z"},
    ]
    return apiserver.put("configmaps", other)


async def test_another_writer_is_named_once_and_not_fought(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin.faces.kube.device_info")
    inventory = make_inventory(short_tmp, family="910", chip_name="910B3", phy_ids=(0, 1))
    now = [1000.0]
    announced: list[tuple[str, str]] = []
    publisher = DeviceInfoPublisher(
        kube,
        inventory,
        NAMESPACE,
        NAME,
        refresh=1.0,
        clock=lambda: now[0],
        announce=lambda reason, message: announced.append((reason, message)),
    )
    async with running(publisher.run):
        await until(lambda: our_writes(apiserver) == 1, "the first write")
        # Once the publisher follows the ConfigMap (a write landing while its first list is under way
        # would reach it only with the next change: the reflector's concern, not this test's).
        await until(lambda: publisher.reflector.synced, "the ConfigMap followed")
        await until(
            lambda: publisher.reflector.get(publisher.where) == apiserver.get("configmaps", NAME, NAMESPACE),
            "the publisher's copy is the stored one",
        )
        seen = written_by_another(apiserver, "Ascend910-1")
        await until(lambda: announced, "the other writer said")
        ((reason, message),) = announced
        assert reason == "OtherPluginWrites"
        assert message.startswith(
            f"another process rewrote the device-info ConfigMap {NAMESPACE}/{NAME} (its field manager: "
            "device-plugin), most likely Huawei's ascend-device-plugin"
        )
        assert "docs/migration.md" in message
        # It keeps writing; the refresh falls due again and again: this plugin writes nothing meanwhile.
        for free in ("Ascend910-0", "Ascend910-0,Ascend910-1", ""):
            now[0] += 5.0
            seen = written_by_another(apiserver, free)
            version = seen["metadata"]["resourceVersion"]
            await until(lambda v=version: publisher.other.version == v, "the other's write seen")
        assert our_writes(apiserver) == 1
        assert len(announced) == 1, "said once for the whole spell"

        # Quiet for FOREIGN_QUIET seconds: an operator's edit (the device list untouched) wakes it up,
        # and it writes the node's state again.
        now[0] += FOREIGN_QUIET + 1.0
        edited = apiserver.get("configmaps", NAME, NAMESPACE)
        assert edited is not None
        edited["data"]["ManuallySeparateNPU"] = ""
        edited["metadata"]["annotations"] = {"edited": "by hand"}
        apiserver.put("configmaps", edited)
        await until(lambda: our_writes(apiserver) == 2, "written again")
    assert "the other writer is quiet; writing it again" in caplog.text
    stored = apiserver.get("configmaps", NAME, NAMESPACE)
    assert stored is not None
    assert json.loads(stored["data"]["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"][
        "huawei.com/Ascend910"
    ] == ("Ascend910-0,Ascend910-1")
