"""The config ConfigMap: reloadable settings and ``fault_levels.json``, changed without restarting pods.

A change applies whole or not at all: one bad key refuses it, with a log line naming key, value and what
is allowed, and the configuration in force stays. A removed key returns to its start-up value.
docs/kubernetes.md, "The config ConfigMap".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import anyio

from ascend_plugin.fault_policy.levels import FaultLevel
from ascend_plugin.fault_policy.overlay import decode_overlay
from ascend_plugin.fault_policy.problems import FaultConfigError
from ascend_plugin.fault_policy.sources import FaultSources
from ascend_plugin.kubeapi.client import CONFIGMAPS, Kube, string_map
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
                overlay = self._fault_levels(value)
                continue
            name = key.replace("-", "_")
            if name not in RELOADABLE:
                allowed = ", ".join([*sorted(RELOADABLE), FAULT_LEVELS_KEY])
                raise SettingsError(
                    f"key {shown(key)} (value {shown(value)}) is not a run-time setting; allowed: {allowed}"
                )
            overrides[name] = value
        return overrides, overlay

    def _fault_levels(self, text: str) -> dict[int, FaultLevel]:
        source = f"{FAULT_LEVELS_KEY} of {self.where}"
        try:
            return decode_overlay(json.loads(text), source)
        except json.JSONDecodeError as error:
            raise SettingsError(f"key {FAULT_LEVELS_KEY!r} is not valid JSON: {error}") from error
        except RecursionError as error:
            raise SettingsError(f"key {FAULT_LEVELS_KEY!r} nests too deeply to be read") from error
        except FaultConfigError as error:
            raise SettingsError(f"key {FAULT_LEVELS_KEY!r}: {error}") from error
