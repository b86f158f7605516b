"""mindx-dl-fault-config when the API server fails: PollInterval re-reads, 404 built-ins, errors keep it.

The watch is muted on the loopback API server (open, passing nothing on, as a
proxy may hold it) so that only the watcher's re-reads can bring news; their
clock (:class:`fault_config_harness.Moved`) moves when the test says.
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
    Moved,
    level_of,
    put_fault_config,
    separate,
    watching,
)
from waiting import until

from ascend_plugin.faces.kube.config_watch import FaultConfigWatcher
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

L = FaultLevel
WHERE = f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"


def gets(apiserver: FakeApiServer, status: int) -> int:
    return len(apiserver.requests_of("get", "configmaps", status))


async def test_a_watch_that_passes_nothing_on_is_backed_by_a_re_read_every_poll_interval(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007"), "PollInterval": "45"})
    async with watching(kube) as (watcher, moved):
        sources = watcher.sources
        await until(lambda: level_of(sources, QUIET) is L.SeparateNPU, "the ConfigMap read at start")
        await until(lambda: moved.asked[-1:] == [45], "the re-read waiting PollInterval")
        apiserver.mute_watches("configmaps")
        presep = json.dumps({"PreSeparateNPUCodes": ["80E21007"]})
        put_fault_config(apiserver, **{"faultCode.json": presep, "PollInterval": "30"})

        moved.advance(44)
        assert (watcher.rereads, gets(apiserver, 200)) == (0, 0)
        moved.advance(1)
        await until(lambda: level_of(sources, QUIET) is L.PreSeparateNPU, "the change, by the re-read")
        assert (watcher.rereads, gets(apiserver, 200)) == (1, 1)
        # From now on at most every 30 s, the new PollInterval.
        await until(lambda: moved.asked[-1:] == [30], "the next re-read waiting the new PollInterval")


async def deleted_unseen(apiserver: FakeApiServer, watcher: FaultConfigWatcher, moved: Moved) -> None:
    """Once the ConfigMap is read and the re-read waits, delete it behind a muted watch."""
    await until(lambda: level_of(watcher.sources, QUIET) is L.SeparateNPU, "the ConfigMap read at start")
    await until(lambda: len(moved.asked) == 2, "the re-read waiting, from the first list on")
    apiserver.mute_watches("configmaps")
    apiserver.delete("configmaps", CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)


async def test_a_re_read_that_finds_none_returns_to_the_built_ins(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007")})
    async with watching(kube) as (watcher, moved):
        sources = watcher.sources
        await deleted_unseen(apiserver, watcher, moved)
        moved.advance(300)
        await until(lambda: sources.configmap is None, "the built-ins, after the 404")
    assert gets(apiserver, 404) == 1
    assert (sources.config.sources["faultCode.json"], level_of(sources, QUIET)) == (BUILTIN, L.NotHandleFault)


async def test_any_other_error_keeps_the_configuration_in_force(
    apiserver: FakeApiServer, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007")})
    async with watching(kube) as (watcher, moved):
        sources = watcher.sources
        apiserver.inject(500, "get", "configmaps")
        await deleted_unseen(apiserver, watcher, moved)
        moved.advance(300)
        await until(lambda: gets(apiserver, 500) == 1, "the failed re-read")
        await until(lambda: len(moved.asked) == 3, "the next re-read waiting")
    assert (sources.config.sources["faultCode.json"], level_of(sources, QUIET)) == (
        FROM_CONFIGMAP,
        L.SeparateNPU,
    )
    [said] = [r for r in caplog.records if r.getMessage().startswith("cannot read the fault configuration")]
    assert said.levelno == logging.WARNING
    assert said.getMessage().startswith(
        f"cannot read the fault configuration ConfigMap {WHERE} (get configmaps {WHERE}: HTTP 500: "
    )
    assert said.getMessage().endswith(
        f"the configuration in force stays: faultCode.json from {FROM_CONFIGMAP}; "
        "faultCustomization.json from built-in faultCustomization.json; PollInterval 300 s (default)"
    )


async def test_a_failing_list_at_start_leaves_the_base_until_the_api_server_answers(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    put_fault_config(apiserver, **{"faultCode.json": separate("80E21007")})
    failing = apiserver.inject(500, "list", "configmaps", times=2)
    async with watching(kube) as (watcher, _):
        sources = watcher.sources
        await until(lambda: failing.hits >= 1, "the failed list")
        assert (sources.configmap, level_of(sources, QUIET)) == (None, L.NotHandleFault)
        await until(lambda: level_of(sources, QUIET) is L.SeparateNPU, "the ConfigMap, once listed")
    assert failing.hits == 2
