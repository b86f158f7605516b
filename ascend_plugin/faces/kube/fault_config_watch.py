"""Huawei's fault configuration ConfigMap, ``kube-system/mindx-dl-fault-config``, followed.

Watched, so a change applies within a second (Huawei's plugin polls every ``PollInterval``); and read
again whenever ``PollInterval`` seconds pass without news of it, since a proxy can hold a watch open
without passing events. Missing, the base configuration applies; an API error keeps the one in force.
docs/faults.md, "Where the configuration comes from".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from ascend_plugin.fault_policy.origin import origin
from ascend_plugin.fault_policy.sources import FaultSources
from ascend_plugin.kubeapi.client import CONFIGMAPS, WATCH_TIMEOUT, JsonObject, Kube, string_map
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.kubeapi.reflector import named_object, object_key

log = logging.getLogger(__name__)


class FaultConfigWatcher:
    """Keeps the node's fault configuration as ``mindx-dl-fault-config`` says."""

    def __init__(
        self,
        kube: Kube,
        sources: FaultSources,
        *,
        namespace: str = CONFIGMAP_NAMESPACE,
        name: str = CONFIGMAP_NAME,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        watch_timeout: int = WATCH_TIMEOUT,
    ) -> None:
        self.sources = sources
        self.name = name
        self.sleep = sleep  # how the wait between two re-reads passes (tests move it)
        self.where = object_key(namespace, name)  # the ConfigMap's namespace/name
        self.reflector = named_object(
            kube,
            CONFIGMAPS,
            namespace,
            name,
            part=f"fault configuration ConfigMap {self.where}",
            watch_timeout=watch_timeout,
        )
        self.rereads = 0  # re-reads attempted
        self._answered = False  # a list or a re-read has said what the ConfigMap is

    async def run(self) -> None:
        """Follow the ConfigMap until cancelled: watch it, and re-read it every PollInterval."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.reflector.run)
            await self._follow()

    async def _follow(self) -> None:
        """Apply each change the reflector shows; re-read when PollInterval passes without one."""
        changes = self.reflector.changes
        seen = -1
        while True:
            if changes.version != seen:
                seen = changes.version
                if self.reflector.synced or self._answered:
                    self.apply(self.reflector.get(self.where))
            if await self._quiet_for_poll_interval(seen):
                await self.reread()

    async def _quiet_for_poll_interval(self, seen: int) -> bool:
        """True once PollInterval passed with the reflector at ``seen``; False at its next change."""
        quiet = False
        async with anyio.create_task_group() as group:

            async def news() -> None:
                await self.reflector.changes.wait_for_change(seen)
                group.cancel_scope.cancel()

            async def poll_interval_passed() -> None:
                nonlocal quiet
                await self.sleep(self.sources.config.poll_interval)
                quiet = True
                group.cancel_scope.cancel()

            group.start_soon(news)
            group.start_soon(poll_interval_passed)
        return quiet

    async def reread(self) -> None:
        """Read the ConfigMap now (a GET); its answer shows in the reflector until the watch has it."""
        self.rereads += 1
        try:
            await self.reflector.read(self.name)
        except KubeError as error:
            log.warning(
                "cannot read the fault configuration ConfigMap %s (%s); the configuration in force stays: %s",
                self.where,
                error,
                origin(self.sources.config),
                extra={"configmap": self.where, "error": type(error).__name__},
            )
        else:
            self._answered = True

    def apply(self, configmap: JsonObject | None) -> bool:
        """Configure the policy by ``configmap`` (None: it does not exist); True when that changed it."""
        data = None if configmap is None else string_map(configmap, "data")
        if not self.sources.set_configmap(data):
            return False
        if data is None:
            log.info(
                "fault configuration ConfigMap %s does not exist; the fault configuration is: %s",
                self.where,
                origin(self.sources.config),
                extra={"configmap": self.where},
            )
        else:
            log.info(
                "fault configuration ConfigMap %s applied: %s",
                self.where,
                origin(self.sources.config),
                extra={"configmap": self.where, "keys": sorted(data)},
            )
        return True
