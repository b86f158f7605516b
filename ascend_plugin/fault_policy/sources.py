"""The fault configuration's three inputs, and the policy that judges by what they make together.

Three parts of the plugin each own one input of :func:`~.config.fault_config`:

* start-up: the base, from ``fault_levels_file`` and the built-in files
  (:func:`~.config.base_config`);
* the watcher of Huawei's ConfigMap ``kube-system/mindx-dl-fault-config``:
  its data, or None when there is none (404, or no Kubernetes side);
* the config ConfigMap's ``fault_levels.json`` (the plugin's own format),
  through :class:`~ascend_plugin.live_config.LiveConfig`.

Each hands its input here; the configuration is assembled again only when an
input changed, and the policy swaps to it (:meth:`~.policy.FaultPolicy.reconfigure`).
Nothing else builds a :class:`~.config.FaultConfig` at run time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ascend_plugin.fault_policy.config import BaseConfig, FaultConfig, LastRead, fault_config
from ascend_plugin.fault_policy.levels import FaultLevel
from ascend_plugin.fault_policy.policy import FaultPolicy


class FaultSources:
    """The inputs of the fault configuration in force, and the node's policy."""

    def __init__(self, base: BaseConfig, clock: Callable[[], float] = time.time) -> None:
        """``clock``: the policy's, Unix seconds (tests move it)."""
        self._base = base
        self._configmap: Mapping[str, str] | None = None
        self._overlay: Mapping[int, FaultLevel] = MappingProxyType({})
        self._overlay_source: str | None = None
        self._read = LastRead()  # the ConfigMap's files as last read whole
        self.policy = FaultPolicy(self._assemble(), clock)

    @property
    def config(self) -> FaultConfig:
        """The configuration in force."""
        return self.policy.config

    @property
    def configmap(self) -> Mapping[str, str] | None:
        """The data of ``mindx-dl-fault-config`` last handed in (None: there is none)."""
        return self._configmap

    def set_configmap(self, data: Mapping[str, str] | None) -> bool:
        """Huawei's ConfigMap now says ``data`` (None: it does not exist); True when it changed."""
        frozen = None if data is None else MappingProxyType(dict(data))
        if frozen == self._configmap:
            return False
        self._configmap = frozen
        return self._reconfigure()

    def set_overlay(self, overlay: Mapping[int, FaultLevel], source: str | None) -> bool:
        """The config ConfigMap's ``fault_levels.json`` is now ``overlay``; True when it changed."""
        frozen = MappingProxyType(dict(overlay))
        if frozen == self._overlay and source == self._overlay_source:
            return False
        self._overlay, self._overlay_source = frozen, source
        return self._reconfigure()

    def _assemble(self) -> FaultConfig:
        config = fault_config(
            self._base,
            self._configmap,
            overlay=self._overlay or None,
            overlay_source=self._overlay_source if self._overlay else None,
            last=self._read,
        )
        self._read = config.read
        return config

    def _reconfigure(self) -> bool:
        self.policy.reconfigure(self._assemble())
        return True
