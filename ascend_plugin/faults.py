"""Fault codes and their levels: which faults take a chip away from new pods.

The mapping from fault code to level is data: a table built into the package
(``data/fault_levels.json``), extended or overridden by an operator's file of
the same format. A chip is healthy while its worst level is NormalNPU,
NotHandleFault or SubHealthFault. A code missing from the table is judged by
its severity: warning or minor counts as NotHandleFault, anything worse (or
unknown) as SeparateNPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from importlib import resources
from pathlib import Path
from types import MappingProxyType


class FaultLevel(IntEnum):
    """Huawei's fault levels, ordered so that a larger value is more severe."""

    NormalNPU = 0
    NotHandleFault = 1
    SubHealthFault = 2
    RestartRequest = 3
    RestartBusiness = 4
    FreeRestartNPU = 5
    RestartNPU = 6
    PreSeparateNPU = 7
    SeparateNPU = 8
    ManuallySeparateNPU = 9

    @property
    def healthy(self) -> bool:
        """Whether a chip whose worst fault has this level may take new pods."""
        return self <= FaultLevel.SubHealthFault

    @property
    def recovers_by_poll(self) -> bool:
        """Whether a raised fault of this level clears once the driver stops listing its code.

        A ManuallySeparateNPU fault stays until its recovery event (or a
        restart): an operator, not a poll, decides the chip is fit again.
        """
        return self < FaultLevel.ManuallySeparateNPU

    @property
    def one_off_hold(self) -> float:
        """Seconds a one-off fault event (assertion 2) of this level keeps a chip Unhealthy."""
        return ONE_OFF_HOLD_SECONDS[self]


# A one-off event reports something that happened, not a state that lasts, so the
# chip is held for a while and then trusted again: longer for the levels that
# call for a reset or separation, not at all for the levels that stay healthy.
ONE_OFF_HOLD_SECONDS: Mapping[FaultLevel, float] = MappingProxyType(
    {
        FaultLevel.NormalNPU: 0.0,
        FaultLevel.NotHandleFault: 0.0,
        FaultLevel.SubHealthFault: 0.0,
        FaultLevel.RestartRequest: 60.0,
        FaultLevel.RestartBusiness: 60.0,
        FaultLevel.FreeRestartNPU: 60.0,
        FaultLevel.RestartNPU: 60.0,
        FaultLevel.PreSeparateNPU: 300.0,
        FaultLevel.SeparateNPU: 300.0,
        FaultLevel.ManuallySeparateNPU: 300.0,
    }
)


class FaultTableError(ValueError):
    """A fault-level table that cannot be used."""


def format_code(code: int) -> str:
    """A fault code as Huawei prints it: eight upper-case hex digits."""
    return f"{code:08X}"


@dataclass(frozen=True)
class Fault:
    """One fault code on a chip and the level it was given."""

    code: int
    level: FaultLevel

    def __str__(self) -> str:
        return f"{format_code(self.code)}:{self.level.name}"


@dataclass(frozen=True)
class FaultTable:
    """Fault code -> level, with the severity rule for unknown codes."""

    levels: Mapping[int, FaultLevel] = field(default_factory=lambda: MappingProxyType({}))

    def level_of(self, code: int, severity: int | None) -> FaultLevel:
        """The level of ``code``; ``severity`` (0-3, None if unknown) decides for unlisted codes."""
        level = self.levels.get(code)
        if level is not None:
            return level
        if severity is not None and severity <= 1:
            return FaultLevel.NotHandleFault
        return FaultLevel.SeparateNPU

    def classify(
        self, codes: Iterable[int], severities: Mapping[int, int], default_severity: int | None
    ) -> tuple[Fault, ...]:
        """Each code with its level, most severe first.

        An unlisted code is judged by its own severity where one is known (from
        a fault event), else by ``default_severity``.
        """
        faults = {Fault(code, self.level_of(code, severities.get(code, default_severity))) for code in codes}
        return tuple(sorted(faults, key=lambda fault: (-fault.level, fault.code)))

    def merged(self, overrides: Mapping[int, FaultLevel]) -> FaultTable:
        """A table where ``overrides`` win over this one."""
        return FaultTable(MappingProxyType({**self.levels, **overrides}))


def parse_levels(data: object, source: str) -> dict[int, FaultLevel]:
    """``{"LevelName": ["80E01801", ...], ...}`` -> {code: level}; keys starting with "_" are comments."""
    if not isinstance(data, dict):
        raise FaultTableError(f"{source}: expected an object of level -> list of hex codes")
    allowed = ", ".join(level.name for level in FaultLevel)
    result: dict[int, FaultLevel] = {}
    for name, codes in data.items():
        if name.startswith("_"):
            continue
        if name not in FaultLevel.__members__:
            raise FaultTableError(f"{source}: unknown fault level {name!r}; allowed: {allowed}")
        if not isinstance(codes, list):
            raise FaultTableError(f"{source}: {name} must be a list of hex codes, not {type(codes).__name__}")
        for text in codes:
            try:
                code = int(str(text), 16)
            except ValueError:
                raise FaultTableError(
                    f"{source}: {name}: {text!r} is not a hex fault code like '80E01801'"
                ) from None
            if not 0 <= code <= 0xFFFFFFFFF:
                raise FaultTableError(f"{source}: {name}: {text!r} is out of range")
            result[code] = FaultLevel[name]
    return result


def builtin_table() -> FaultTable:
    """The table that ships with the plugin."""
    text = resources.files("ascend_plugin").joinpath("data/fault_levels.json").read_text(encoding="utf-8")
    return FaultTable(MappingProxyType(parse_levels(json.loads(text), "built-in fault table")))


def load_table(path: Path | None) -> FaultTable:
    """The built-in table, with the operator's file (if any) applied on top."""
    table = builtin_table()
    if path is None:
        return table
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise FaultTableError(f"cannot read fault-level file {path}: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise FaultTableError(f"fault-level file {path} is not valid JSON: {error}") from error
    return table.merged(parse_levels(data, str(path)))
