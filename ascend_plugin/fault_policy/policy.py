"""The node's fault policy, and the inputs of the configuration it judges by.

Chips are named by physical ID; times are Unix milliseconds from the clock given.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from types import MappingProxyType

from ascend_plugin.fault_policy.chip import ChipFaults, ChipJudgement
from ascend_plugin.fault_policy.config import BaseConfig, FaultConfig, LastRead, fault_config
from ascend_plugin.fault_policy.escalations import Release, UpgradeKind, UpgradeReason
from ascend_plugin.fault_policy.faults import FaultLevel, Observation

log = logging.getLogger(__name__)


class FaultPolicy:
    """Huawei's fault levels, escalation and manual separation for the chips of one node."""

    def __init__(self, config: FaultConfig, clock: Callable[[], float] = time.time) -> None:
        self._config = config
        self._clock = clock
        self._chips: dict[int, ChipFaults] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` whenever judging again may give another answer; return the way to stop."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    @property
    def config(self) -> FaultConfig:
        return self._config

    def now(self) -> int:
        return round(self._clock() * 1000)

    def chip(self, phy_id: int) -> ChipFaults:
        """The state of chip ``phy_id`` (a chip never seen starts without faults)."""
        chip = self._chips.get(phy_id)
        if chip is None:
            chip = self._chips[phy_id] = ChipFaults(phy_id, self._config)
        return chip

    # -- the monitor ---------------------------------------------------------------------

    def observe(self, phy_id: int, observation: Observation) -> bool:
        """Apply a fault event's observation; True when the chip's codes should be read afresh."""
        return self.chip(phy_id).observe(observation)

    def reconcile(self, phy_id: int, codes: Collection[int], at: int | None = None) -> None:
        """A poll of chip ``phy_id`` listed ``codes`` (at ``at``, Unix ms; default now)."""
        self.chip(phy_id).reconcile(codes, self.now() if at is None else at)

    def read_afresh(self, phy_id: int) -> None:
        """Chip ``phy_id`` was reset (hot reset, reset-finished event): its next poll decides its codes."""
        self.chip(phy_id).read_afresh()

    def judge(self, phy_id: int, *, held: bool = False) -> ChipJudgement:
        """Chip ``phy_id``'s levels and health now; ``held``: a pod holds the chip."""
        return self.chip(phy_id).judge(self.now(), held=held)

    def wake_at(self) -> int | None:
        """When judging some chip again may change its answer with nothing observed (Unix ms)."""
        return min((t for chip in self._chips.values() if (t := chip.wake_at()) is not None), default=None)

    # -- the device-info ConfigMap -------------------------------------------------------

    def manually_separated(self) -> tuple[int, ...]:
        return tuple(sorted(phy for phy, chip in self._chips.items() if chip.reasons.manual))

    def reasons(self) -> dict[int, tuple[UpgradeReason, ...]]:
        """The escalations standing, per chip with any: the content of UpgradeFaultReason."""
        return {phy: reasons for phy, chip in sorted(self._chips.items()) if (reasons := chip.reasons.all())}

    def mark_written(self, phy_ids: Collection[int]) -> None:
        """A ConfigMap write naming ``phy_ids`` in ManuallySeparateNPU succeeded."""
        for phy in phy_ids:
            chip = self._chips.get(phy)
            if chip is not None and chip.reasons.manual:
                chip.separation_written = True

    def sync_manual_separation(self, listed: Collection[int]) -> None:
        """The ConfigMap's ManuallySeparateNPU names ``listed``: a chip we wrote out and missing now was
        released by an operator; one not yet written out is kept; one we never separated is dropped later."""
        released = False
        for phy, chip in sorted(self._chips.items()):
            if chip.reasons.manual and chip.separation_written and phy not in listed:
                chip.release_manual()
                released = True
        strangers = sorted(set(listed) - set(self.manually_separated()))
        if strangers:
            log.info(
                "ManuallySeparateNPU names chips %s this plugin has not separated; the next write drops them",
                ", ".join(map(str, strangers)),
                extra={"chips": strangers},
            )
        if released:
            self._changed()

    def restore(self, separated: Collection[int], reasons: Mapping[int, Iterable[UpgradeReason]]) -> None:
        """What the ConfigMap recorded before a restart: ManuallySeparateNPU and UpgradeFaultReason."""
        now = self.now()
        for phy in sorted(set(separated) | set(reasons)):
            self.chip(phy).restore(phy in separated, reasons.get(phy, ()), now)
        self._changed()

    # -- configuration and events --------------------------------------------------------

    def reconfigure(self, config: FaultConfig) -> None:
        self._config = config
        now = self.now()
        for chip in self._chips.values():
            chip.reconfigure(config, now)
        self._changed()

    def escalations(self) -> dict[UpgradeKind, int]:
        """Escalations recorded since start, by Huawei's ``upgrade_type`` (a recurring one counts once)."""
        total: Counter[UpgradeKind] = Counter()
        for chip in self._chips.values():
            total.update(chip.escalated)
        return dict(total)

    def drain_releases(self) -> list[Release]:
        """Every escalation lifted since the last call, chip by chip."""
        return [release for _, chip in sorted(self._chips.items()) for release in chip.drain_releases()]


class FaultSources:
    """The inputs of the fault configuration (the base, ``mindx-dl-fault-config``, ``fault_levels.json``)
    and the node's policy, assembled again only when an input changed."""

    def __init__(self, base: BaseConfig, clock: Callable[[], float] = time.time) -> None:
        """``clock``: the policy's, Unix seconds (tests move it)."""
        self._base = base
        self._configmap: Mapping[str, str] | None = None
        self._overlay: Mapping[int, FaultLevel] = MappingProxyType({})
        self._overlay_source: str | None = None
        self.policy = FaultPolicy(self._assemble(LastRead()), clock)

    @property
    def config(self) -> FaultConfig:
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
        self.policy.reconfigure(self._assemble(self.policy.config.read))
        return True

    def set_overlay(self, overlay: Mapping[int, FaultLevel], source: str | None) -> bool:
        """The config ConfigMap's ``fault_levels.json`` is now ``overlay``; True when it changed."""
        frozen = MappingProxyType(dict(overlay))
        if frozen == self._overlay and source == self._overlay_source:
            return False
        self._overlay, self._overlay_source = frozen, source
        self.policy.reconfigure(self._assemble(self.policy.config.read))
        return True

    def _assemble(self, last: LastRead) -> FaultConfig:
        """The configuration the inputs make; ``last``: the ConfigMap's files as last read whole."""
        return fault_config(
            self._base,
            self._configmap,
            overlay=self._overlay or None,
            overlay_source=self._overlay_source if self._overlay else None,
            last=last,
        )
