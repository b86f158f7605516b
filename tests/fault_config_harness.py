"""Huawei's fault configuration ConfigMap on the loopback API server, and a watcher of it to drive.

The watcher re-reads the ConfigMap every PollInterval seconds; :class:`Moved`
is the wait it does that in, passing only when a test moves it, so a test of
the re-reads takes no minutes and no wall-clock guesses.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fake_apiserver import FakeApiServer
from kube_harness import running

from ascend_plugin.faces.kube.config_watch import FaultConfigWatcher
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, base_config
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.kubeapi.client import Kube

QUIET = 0x80E21007  # NotHandleFault in Huawei's built-in faultCode.json
BUILTIN = "built-in faultCode.json"
FROM_CONFIGMAP = f"faultCode.json of {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"


class Moved:
    """Waits that end only when the test moves this clock past them; what each waited for is kept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.asked: list[float] = []
        self._moved = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        end = self.now + seconds
        while self.now < end:
            await self._moved.wait()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        moved, self._moved = self._moved, anyio.Event()
        moved.set()


def put_fault_config(apiserver: FakeApiServer, **data: str) -> None:
    """Create or replace ``kube-system/mindx-dl-fault-config`` with ``data``."""
    configmap = {"metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE}, "data": data}
    apiserver.put("configmaps", configmap)


def separate(*codes: str) -> str:
    """A faultCode.json whose SeparateNPUCodes are ``codes``."""
    return json.dumps({"SeparateNPUCodes": list(codes)})


def level_of(sources: FaultSources, code: int) -> FaultLevel | None:
    """The level the configuration in force lists ``code`` at."""
    return sources.config.codes.list_level(code)


@asynccontextmanager
async def watching(kube: Kube) -> AsyncIterator[tuple[FaultConfigWatcher, Moved]]:
    """A watcher over the built-in base, running, and the clock of its re-reads."""
    moved = Moved()
    watcher = FaultConfigWatcher(kube, FaultSources(base_config(None)), sleep=moved.sleep)
    async with running(watcher.run):
        yield watcher, moved
