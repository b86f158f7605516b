"""A fault policy on a clock the test moves, and short ways to tell it what happens to a chip."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ascend_plugin.fault_policy.chip import ChipJudgement
from ascend_plugin.fault_policy.config import FaultConfig, base_config, fault_config
from ascend_plugin.fault_policy.faults import Assertion, Observation
from ascend_plugin.fault_policy.policy import FaultPolicy

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
LINK_DOWN = 0x81078603
HOUR = 3600.0
DAY = 86_400.0


@dataclass
class Clock:
    """Wall-clock seconds that pass only when a test says so."""

    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def ms(self) -> int:
        return round(self.now * 1000)


def configured(
    codes: Mapping[str, object] | None = None,
    customization: Mapping[str, object] | None = None,
    **keys: str,
) -> FaultConfig:
    """The configuration Huawei's ConfigMap with these keys gives (None: no ConfigMap at all)."""
    data = dict(keys)
    if codes is not None:
        data["faultCode.json"] = json.dumps(codes)
    if customization is not None:
        data["faultCustomization.json"] = json.dumps(customization)
    return fault_config(base_config(None), data if data or codes is not None else None)


@dataclass
class Node:
    """A policy, its clock, and verbs for one chip at a time."""

    config: FaultConfig = field(default_factory=configured)
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.policy = FaultPolicy(self.config, self.clock)

    def raised(self, phy: int, code: int, severity: int | None = 3) -> bool:
        return self.policy.observe(phy, Observation(code, Assertion.RAISED, self.clock.ms, severity))

    def cleared(self, phy: int, code: int) -> None:
        self.policy.observe(phy, Observation(code, Assertion.RECOVERED, self.clock.ms, 0))

    def once(self, phy: int, code: int, severity: int | None = 3) -> None:
        self.policy.observe(phy, Observation(code, Assertion.ONE_OFF, self.clock.ms, severity))

    def polled(self, phy: int, *codes: int) -> None:
        self.policy.reconcile(phy, codes)

    def judge(self, phy: int, *, held: bool = False) -> ChipJudgement:
        return self.policy.judge(phy, held=held)

    def at(self, seconds: float, phy: int = 0) -> ChipJudgement:
        """Move the clock ``seconds`` on and judge ``phy``."""
        self.clock.advance(seconds)
        return self.judge(phy)
