"""mindx-dl-fault-config is watched: read at start, and each change applies as the watch delivers it.

The ConfigMap lives on the loopback API server and is read through the real
kubernetes-asyncio client. The watcher's PollInterval re-reads never come
here (their clock is not moved), so whatever applies came by the watch.
"""

from __future__ import annotations

import json
import logging

import pytest
from fake_apiserver import FakeApiServer
from fault_config_harness import (
    BUILTIN,
    FROM_CONFIGMAP,
    QUIET,
    level_of,
    put_fault_config,
    separate,
    watching,
)
from waiting import until

from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from ascend_plugin.fault_policy.faults import Assertion, FaultLevel, Observation
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

L = FaultLevel


async def test_read_at_start_then_each_change_applies_through_the_watch(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007"), "PollInterval": "45"})
    async with watching(kube) as (watcher, moved):
        sources = watcher.sources
        await until(lambda: level_of(sources, QUIET) is L.SeparateNPU, "the ConfigMap read at start")
        assert sources.config.poll_interval == 45
        assert sources.config.sources["faultCode.json"] == FROM_CONFIGMAP
        await until(lambda: moved.asked[-1:] == [45], "the re-read waiting the new PollInterval")

        customization = {"FaultDuration": [], "FaultFrequency": []}
        put_fault_config(
            apiserver,
            **{
                "faultCode.json": json.dumps({"PreSeparateNPUCodes": ["80E21007"]}),
                "faultCustomization.json": json.dumps(customization),
                "PollInterval": "60",
            },
        )
        await until(lambda: level_of(sources, QUIET) is L.PreSeparateNPU, "the change")
        assert sources.config.poll_interval == 60
        assert not sources.config.customization.frequency
        await until(lambda: moved.asked[-1:] == [60], "the re-read waiting the new PollInterval")
    assert watcher.rereads == 0  # the watch brought it; PollInterval never passed


async def test_the_policy_judges_by_the_new_configuration_at_once(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    async with watching(kube) as (watcher, _):
        policy = watcher.sources.policy
        changes: list[None] = []
        policy.on_change(lambda: changes.append(None))
        policy.observe(0, Observation(QUIET, Assertion.RAISED, policy.now(), 3))
        await until(lambda: watcher.reflector.synced, "the first list")
        assert (policy.judge(0).level, policy.judge(0).healthy) == (L.NotHandleFault, True)
        seen = len(changes)
        put_fault_config(apiserver, **{"faultCode.json": separate("80e21007")})
        await until(lambda: len(changes) > seen, "the policy told to judge again")
        assert (policy.judge(0).level, policy.judge(0).healthy) == (L.SeparateNPU, False)


async def test_created_later_it_applies_and_deleted_the_built_ins_return(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    async with watching(kube) as (watcher, _):
        sources = watcher.sources
        await until(lambda: watcher.reflector.synced, "the first list")
        assert sources.configmap is None
        assert (sources.config.sources["faultCode.json"], level_of(sources, QUIET)) == (
            BUILTIN,
            L.NotHandleFault,
        )

        put_fault_config(apiserver, **{"faultCode.json": separate("80E21007")})
        await until(lambda: level_of(sources, QUIET) is L.SeparateNPU, "the ConfigMap created")

        apiserver.delete("configmaps", CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
        await until(lambda: sources.configmap is None, "the ConfigMap deleted")
        assert (sources.config.sources["faultCode.json"], level_of(sources, QUIET)) == (
            BUILTIN,
            L.NotHandleFault,
        )


async def test_a_missing_key_takes_that_part_from_the_built_ins(
    apiserver: FakeApiServer, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ascend_plugin")
    put_fault_config(apiserver, PollInterval="120")
    async with watching(kube) as (watcher, _):
        sources = watcher.sources
        await until(lambda: sources.configmap is not None, "the ConfigMap read")
    assert sources.config.poll_interval == 120
    assert sources.config.sources["faultCode.json"] == BUILTIN
    assert sources.config.sources["faultCustomization.json"] == "built-in faultCustomization.json"
    said = [record.getMessage() for record in caplog.records]
    assert any("the ConfigMap has no faultCode.json key; built-in faultCode.json applies" in m for m in said)
    assert any(
        m.startswith(f"fault configuration ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} applied: ")
        and "PollInterval 120 s (PollInterval of kube-system/mindx-dl-fault-config)" in m
        for m in said
    )
