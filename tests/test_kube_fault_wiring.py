"""The publisher table hands the node's fault policy to both of its publishers.

``run_kube`` starts every enabled row of PUBLISHERS over the loopback API server
through the real kubernetes-asyncio client: the fault-config row configures the
policy from mindx-dl-fault-config, the device-info row writes what the policy
separated. The inventory carries the policy's judgements
(:class:`kube_harness.Judged` stands in for the health monitor).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from fault_config_harness import QUIET, put_fault_config, separate
from kube_harness import NODE, judged_node, running
from waiting import until

from ascend_plugin.faces.kube.publishers import run_kube
from ascend_plugin.fault_policy.faults import Assertion, FaultLevel, Observation

pytestmark = pytest.mark.anyio


async def test_the_fault_configuration_and_the_device_info_share_the_policy(
    apiserver: FakeApiServer, kubeconfig: Path, short_tmp: Path
) -> None:
    node = judged_node(short_tmp, kubeconfig, node_events=False)
    inventory, faults = node.inventory, node.faults
    faults.policy.observe(1, Observation(QUIET, Assertion.RAISED, faults.policy.now(), 3))
    node.judged.judge()
    assert inventory.chips()[1].healthy  # NotHandleFault by the built-in lists
    inputs = node.inputs()
    name = f"mindx-dl-deviceinfo-{NODE}"
    # What a plugin before this one separated: the device-info publisher reads it back into the policy.
    before = {"ManuallySeparateNPU": "Ascend910-0", "UpgradeFaultReason": "{}"}
    apiserver.put("configmaps", {"metadata": {"name": name, "namespace": "kube-system"}, "data": before})

    def device_info() -> str:
        configmap = apiserver.get("configmaps", name, "kube-system")
        return "" if configmap is None else configmap["data"].get("DeviceInfoCfg", "")

    async with running(lambda: run_kube(inputs)):
        await until(lambda: faults.policy.manually_separated() == (0,), "the separation read back")
        put_fault_config(apiserver, **{"faultCode.json": separate("80E21007")})
        await until(lambda: not inventory.chips()[1].healthy, "the chip judged by the ConfigMap's lists")
        await until(
            lambda: '"huawei.com/Ascend910-Unhealthy":"Ascend910-0,Ascend910-1"' in device_info(),
            "the device-info ConfigMap showing it",
        )
    judgement = inventory.chips()[1].health.judgement
    assert judgement is not None
    assert judgement.level is FaultLevel.SeparateNPU
    assert not inventory.chips()[0].healthy  # manually separated, as read back
