"""The per-code fault table the health verdict reads: each code's level, and the rule for the rest.

The table ships with the package (``data/fault_levels.json``, the plugin's own
format: level name -> codes) and an operator's ``fault_levels_file`` changes
it, in either format :func:`~ascend_plugin.fault_policy.config.read_levels_file`
reads: Huawei's ``faultCode.json`` replaces it, the plugin's format is merged
over it. A chip is healthy while its worst level is NormalNPU, NotHandleFault
or SubHealthFault. A code missing from the table is judged by its severity:
warning or minor counts as NotHandleFault, anything worse (or unknown) as
SeparateNPU.

Huawei's whole policy (its list order, FaultFrequency, FaultDuration, manual
separation, network health) is :mod:`ascend_plugin.fault_policy`; the level
names and the file formats are defined there and used here under the names
the rest of the plugin imports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from ascend_plugin.fault_policy.config import read_levels_file
from ascend_plugin.fault_policy.levels import ONE_OFF_HOLD_SECONDS, FaultLevel
from ascend_plugin.fault_policy.overlay import decode_overlay
from ascend_plugin.fault_policy.problems import FaultConfigError

__all__ = [
    "ONE_OFF_HOLD_SECONDS",
    "Fault",
    "FaultLevel",
    "FaultTable",
    "FaultTableError",
    "builtin_table",
    "format_code",
    "load_table",
    "parse_levels",
]

FaultTableError = FaultConfigError  # a fault-level table that cannot be used
parse_levels = decode_overlay  # the plugin's format: {"LevelName": ["80E01801", ...]} -> {code: level}


def format_code(code: int) -> str:
    """A fault code as the plugin logs it: at least eight upper-case hex digits."""
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


def builtin_table() -> FaultTable:
    """The table that ships with the plugin."""
    text = resources.files("ascend_plugin").joinpath("data/fault_levels.json").read_text(encoding="utf-8")
    return FaultTable(MappingProxyType(parse_levels(json.loads(text), "built-in fault table")))


def load_table(path: Path | None) -> FaultTable:
    """The table for ``fault_levels_file`` = ``path``: the built-in one, replaced or changed by the file.

    Raises FaultTableError naming the file and what is wrong with it.
    """
    table = builtin_table()
    if path is None:
        return table
    read = read_levels_file(path)
    if read.lists is not None:
        return FaultTable(MappingProxyType(read.lists.per_code_levels()))
    return table.merged(read.overlay)
