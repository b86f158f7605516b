"""The ConfigMaps that configure a running plugin, followed: the config ConfigMap and Huawei's
``kube-system/mindx-dl-fault-config``.

The config ConfigMap (reloadable settings, ``fault_levels.json``) applies whole or not at all: one bad
key refuses the change, said with key, value and what is allowed; a removed key returns to its start-up
value (docs/kubernetes.md, "The config ConfigMap"). The fault configuration applies within a second of a
change (Huawei's plugin polls every ``PollInterval``) and is read again whenever ``PollInterval`` seconds
pass without news of it, since a proxy can hold a watch open without passing events; missing, the base
configuration applies (docs/faults.md, "Where the configuration comes from").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping

import anyio

from ascend_plugin.changes import first_change
from ascend_plugin.fault_policy.config import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from ascend_plugin.fault_policy.documents import FaultConfigError
from ascend_plugin.fault_policy.fault_codes import decode_overlay
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.kubeapi.client import CONFIGMAPS, JsonObject, Kube, string_map
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.kubeapi.reflector import named_object, object_key
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.settings import RELOADABLE, SettingsError, shown

log = logging.getLogger(__name__)

FAULT_LEVELS_KEY = "fault_levels.json"


class ConfigWatcher:
    """Applies the config ConfigMap to a running plugin, atomically, on every change."""

    def __init__(
        self, kube: Kube, config: LiveConfig, faults: FaultSources, namespace: str, name: str
    ) -> None:
        self.config = config
        self.faults = faults
        self.where = object_key(namespace, name)  # the ConfigMap's namespace/name
        self.reflector = named_object(
            kube, CONFIGMAPS, namespace, name, part=f"config ConfigMap {self.where}"
        )
        self._applied: dict[str, str] | None = None

    async def run(self) -> None:
        """Follow the ConfigMap until cancelled: apply it after each change (the reflector backs off)."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.reflector.run)
            await self.reflector.wait_synced()
            while True:
                seen = self.reflector.changes.version
                configmap = self.reflector.get(self.where)
                self.apply({} if configmap is None else string_map(configmap, "data"))
                await self.reflector.changes.wait_for_change(seen)

    def apply(self, data: Mapping[str, str]) -> bool:
        """Apply the ConfigMap's ``data``; False (and nothing changed) when it is refused."""
        if data == self._applied:
            return True
        try:
            overrides, overlay = self._parse(data)
            # A removed key returns to the value the plugin started with.
            self.config.apply_overrides(overrides)
        except SettingsError as error:
            log.error(
                "config ConfigMap %s refused, the current configuration stays: %s",
                self.where,
                error,
                extra={"configmap": self.where},
            )
            return False
        source = f"{FAULT_LEVELS_KEY} of {self.where}" if overlay else None
        if self.faults.set_overlay(overlay, source):
            log.info(
                "config ConfigMap %s: %s",
                self.where,
                f"{FAULT_LEVELS_KEY} applies ({len(overlay)} codes)"
                if overlay
                else f"no {FAULT_LEVELS_KEY} any more",
                extra={"configmap": self.where},
            )
        self._applied = dict(data)
        log.info(
            "config ConfigMap %s applied (%s)",
            self.where,
            ", ".join(sorted(data)) or "no keys: start-up values",
            extra={"configmap": self.where},
        )
        return True

    def _parse(self, data: Mapping[str, str]) -> tuple[dict[str, str], dict[int, FaultLevel]]:
        """The setting overrides and the fault levels ``data`` asks for; SettingsError if invalid."""
        overrides: dict[str, str] = {}
        overlay: dict[int, FaultLevel] = {}
        for key, value in data.items():
            if key == FAULT_LEVELS_KEY:
                source = f"{FAULT_LEVELS_KEY} of {self.where}"
                try:
                    overlay = decode_overlay(json.loads(value), source)
                except json.JSONDecodeError as error:
                    raise SettingsError(f"key {FAULT_LEVELS_KEY!r} is not valid JSON: {error}") from error
                except RecursionError as error:
                    raise SettingsError(f"key {FAULT_LEVELS_KEY!r} nests too deeply to be read") from error
                except FaultConfigError as error:
                    raise SettingsError(f"key {FAULT_LEVELS_KEY!r}: {error}") from error
                continue
            name = key.replace("-", "_")
            if name not in RELOADABLE:
                allowed = ", ".join([*sorted(RELOADABLE), FAULT_LEVELS_KEY])
                raise SettingsError(
                    f"key {shown(key)} (value {shown(value)}) is not a run-time setting; allowed: {allowed}"
                )
            overrides[name] = value
        return overrides, overlay


class FaultConfigWatcher:
    """Keeps the node's fault configuration as ``mindx-dl-fault-config`` says."""

    def __init__(
        self, kube: Kube, sources: FaultSources, *, sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    ) -> None:
        self.sources = sources
        self.sleep = sleep  # how the wait between two re-reads passes (tests move it)
        self.where = object_key(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        self.reflector = named_object(
            kube,
            CONFIGMAPS,
            CONFIGMAP_NAMESPACE,
            CONFIGMAP_NAME,
            part=f"fault configuration ConfigMap {self.where}",
        )
        self.rereads = 0  # re-reads attempted
        self._answered = False  # a list or a re-read has said what the ConfigMap is

    async def run(self) -> None:
        """Follow the ConfigMap until cancelled: apply each change the watch shows, and re-read it when
        PollInterval passes without one."""
        changes = self.reflector.changes
        seen = -1
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.reflector.run)
            while True:
                if changes.version != seen:
                    seen = changes.version
                    if self.reflector.synced or self._answered:
                        self.apply(self.reflector.get(self.where))
                poll_interval = self.sources.config.poll_interval
                if not await first_change((changes, seen), within=poll_interval, sleep=self.sleep):
                    await self.reread()

    async def reread(self) -> None:
        """Read the ConfigMap now (a GET); its answer shows in the reflector until the watch has it."""
        self.rereads += 1
        try:
            await self.reflector.read(CONFIGMAP_NAME)
        except KubeError as error:
            log.warning(
                "cannot read the fault configuration ConfigMap %s (%s); the configuration in force stays: %s",
                self.where,
                error,
                self.sources.config.origin(),
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
                self.sources.config.origin(),
                extra={"configmap": self.where},
            )
        else:
            log.info(
                "fault configuration ConfigMap %s applied: %s",
                self.where,
                self.sources.config.origin(),
                extra={"configmap": self.where, "keys": sorted(data)},
            )
        return True
