"""Watches that fail at once are backed off, not reopened at once: the API server is not hammered.

A watch that ends at once (200 with no body: a proxy that closes streams after
their headers) is a failure, said once at WARNING; so are watches that fail
(500, 410, no RBAC for watch) while lists succeed: the backoff grows to its cap
instead of starting over at each list. In-process, the backoff's waits pass on
a virtual clock, so a minute of retries takes a moment; against a real plugin
process, each request has its backoff step.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.lowlevel
import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, running
from log_records import lines, records
from plugin_harness import FakeNode
from plugin_process import PluginProcess, plugin_process
from waiting import until

from ascend_plugin.kubeapi import client
from ascend_plugin.kubeapi.client import CONFIGMAPS, Kube
from ascend_plugin.kubeapi.reflector import Reflector, unchanged
from ascend_plugin.kubeapi.retry import Retrier
from ascend_plugin.testing.kube_apiserver import Recorded
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

NAMESPACE = "kube-system"
RETRY = "ascend_plugin.kubeapi.retry"
MINUTE = 60.0
FIRST_FEW = 5  # requests before the backoff reaches a second
ENDED_AT_ONCE = "the watch ended at once without sending anything"


class VirtualTime:
    """The backoff's waits pass at once on a clock of their own."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.now += delay
        await anyio.lowlevel.checkpoint()


def configmaps(kube: Kube, time: VirtualTime) -> Reflector[Any]:
    """kube-system's ConfigMaps, with the plugin's own backoff (jittered, up to its cap) on ``time``."""
    retry = Retrier("test ConfigMaps", sleep=time.sleep)
    return Reflector(
        kube,
        CONFIGMAPS,
        unchanged,
        part="test ConfigMaps",
        namespace=NAMESPACE,
        retry=retry,
        clock=time.clock,
    )


def requests_of_configmaps(apiserver: FakeApiServer) -> list[Recorded]:
    return [r for r in apiserver.requests if r.resource == "configmaps" and r.verb in ("list", "watch")]


async def a_minute_of(apiserver: FakeApiServer, reflector: Reflector[Any], time: VirtualTime) -> int:
    """The requests the reflector makes in a virtual minute (or as soon as they are far too many)."""
    async with running(reflector.run):
        await until(
            lambda: time.now >= MINUTE or len(requests_of_configmaps(apiserver)) > 10 * MINUTE,
            "a minute of backoff, or far too many requests",
        )
    return len(requests_of_configmaps(apiserver))


async def test_watches_that_end_at_once_are_backed_off_and_said_once(
    apiserver: FakeApiServer, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.cut_watches("configmaps")
    time = VirtualTime()
    requests = await a_minute_of(apiserver, configmaps(kube, time), time)
    assert requests <= FIRST_FEW + MINUTE
    warned = records(caplog, RETRY, level=logging.WARNING, part="test ConfigMaps")
    assert len(warned) == 1, [record.getMessage() for record in warned]
    assert ENDED_AT_ONCE in warned[0].getMessage()
    assert "does a proxy or load balancer close streams early?" in warned[0].getMessage()


@pytest.mark.parametrize("failure", [500, 410, 403])
async def test_watches_that_fail_while_lists_succeed_are_backed_off(
    apiserver: FakeApiServer, kube: Kube, failure: int
) -> None:
    if failure == 403:
        apiserver.deny("watch", "configmaps")  # RBAC grants list, not watch
    else:
        apiserver.inject(failure, "watch", "configmaps")
    time = VirtualTime()
    reflector = configmaps(kube, time)
    requests = await a_minute_of(apiserver, reflector, time)
    assert requests <= FIRST_FEW + MINUTE
    assert reflector.retry.attempt >= 4  # the backoff grew: no list started it over


async def test_an_event_over_aiohttp_s_line_limit_is_read(apiserver: FakeApiServer, kube: Kube) -> None:
    time = VirtualTime()
    reflector = configmaps(kube, time)
    large = "x" * 5 * 1024 * 1024  # over aiohttp's readline limit (4 MiB with kubernetes-asyncio's buffer)
    async with running(reflector.run):
        await until(lambda: reflector.synced and reflector.watches, "watching")
        apiserver.put(
            "configmaps", {"metadata": {"name": "large", "namespace": NAMESPACE}, "data": {"a": large}}
        )
        await until(lambda: reflector.get(f"{NAMESPACE}/large") is not None, "the large ConfigMap")
    assert reflector.retry.failures == 0


async def test_an_event_over_the_limit_is_a_failure_backed_off_not_a_crash(
    apiserver: FakeApiServer, kube: Kube, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_EVENT_LINE", 64 * 1024)
    time = VirtualTime()
    reflector = configmaps(kube, time)
    async with running(reflector.run):
        await until(lambda: reflector.synced and reflector.watches, "watching")
        apiserver.put(
            "configmaps", {"metadata": {"name": "huge", "namespace": NAMESPACE}, "data": {"a": "x" * 100_000}}
        )
        await until(lambda: reflector.retry.attempt >= 3, "three failed watches, backed off")
    (said,) = records(caplog, RETRY, level=logging.WARNING, part="test ConfigMaps")
    assert "an event of over 65536 bytes" in said.getMessage()
    assert reflector.get(f"{NAMESPACE}/huge") is None


# -- a real plugin process ---------------------------------------------------------------------------


@pytest.fixture
def plugin(
    apiserver: FakeApiServer,
    kubeconfig: Path,
    kubelet: KubeletStandIn,
    node: FakeNode,
    plugin_dir: Path,
    short_tmp: Path,
) -> Iterator[PluginProcess]:
    """The plugin on its Kubernetes side, logging every retry (DEBUG)."""
    assert kubelet
    apiserver.add_node(NODE)
    extra = ("--node-name", NODE, "--kubeconfig", str(kubeconfig), "--log-level", "DEBUG")
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", *extra) as running_plugin:
        yield running_plugin


def attempts(plugin: PluginProcess) -> Counter[str]:
    """The highest failed attempt each part has logged."""
    highest: Counter[str] = Counter()
    for line in lines(plugin.lines(), RETRY):
        part, attempt = line.get("part"), line.get("attempt")
        if isinstance(part, str) and isinstance(attempt, int):
            highest[part] = max(highest[part], attempt)
    return highest


def reflector_requests(apiserver: FakeApiServer, resource: str, selector: str) -> list[Recorded]:
    """The lists and watches of one reflector (by its field selector)."""
    return [
        r
        for r in apiserver.requests
        if r.resource == resource and r.verb in ("list", "watch") and r.query.get("fieldSelector") == selector
    ]


REFLECTORS = {  # part -> (resource, field selector)
    "node labels": ("nodes", f"metadata.name={NODE}"),
    f"fault configuration ConfigMap {NAMESPACE}/mindx-dl-fault-config": (
        "configmaps",
        "metadata.name=mindx-dl-fault-config",
    ),
}


@pytest.mark.slow
async def test_a_plugin_whose_watches_end_at_once_backs_off_each_reflector(
    apiserver: FakeApiServer, plugin: PluginProcess
) -> None:
    apiserver.cut_watches("nodes", "configmaps")
    await until(
        lambda: (
            all(attempts(plugin)[part] >= 4 for part in REFLECTORS)
            or any(len(reflector_requests(apiserver, *watched)) > 60 for watched in REFLECTORS.values())
        ),
        "each reflector at its fourth attempt, or far too many requests",
        within=60,
        explain=lambda: str(attempts(plugin)),
    )
    for part, watched in REFLECTORS.items():
        done = attempts(plugin)[part]
        # One list, then one watch per backoff step (and the one on its way now).
        assert len(reflector_requests(apiserver, *watched)) <= done + 2, part
        warned = lines(plugin.lines(), RETRY, level="WARNING", part=part)
        assert len(warned) == 1, part
        assert ENDED_AT_ONCE in warned[0]["msg"]


@pytest.mark.slow
@pytest.mark.parametrize("failure", [500, 410, 403])
async def test_a_plugin_whose_node_watches_fail_while_lists_succeed_backs_off(
    apiserver: FakeApiServer, plugin: PluginProcess, failure: int
) -> None:
    if failure == 403:
        apiserver.deny("watch", "nodes")  # RBAC without watch on nodes
    else:
        apiserver.inject(failure, "watch", "nodes")
    node = REFLECTORS["node labels"]
    await until(
        lambda: attempts(plugin)["node labels"] >= 4 or len(reflector_requests(apiserver, *node)) > 60,
        "the node labels at their fourth attempt, or far too many requests",
        within=60,
        explain=lambda: str(attempts(plugin)),
    )
    # At most a list and a watch per backoff step (410: list again), and the pair on its way now.
    assert len(reflector_requests(apiserver, *node)) <= 2 * attempts(plugin)["node labels"] + 2
