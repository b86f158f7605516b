"""``faultCustomization.json``: GraceTolerance, FaultFrequency and FaultDuration, with Huawei's ranges.

A bad entry is ignored with a note; a code in several entries follows the first valid one
(docs/faults.md "faultCustomization.json").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from ascend_plugin.fault_policy.documents import (
    ConfigNote,
    fields,
    go_array,
    go_int,
    go_string,
    go_strings,
    load_document,
)
from ascend_plugin.fault_policy.faults import HBM_MULTI_BIT, NETWORK_CODES, FaultLevel, parse_code
from ascend_plugin.settings import shown

L = FaultLevel

NEVER = 1 << 32  # ReleaseTimeWindow not set: Huawei stores 2**32 seconds, which never passes
TIME_WINDOW = (60, 864_000)
TIMES = (1, 100)
RELEASE_WINDOW = (60, NEVER)
FAULT_TIMEOUT = (0, 600)
RECOVER_TIMEOUT = (0, 86_400)
# GraceTolerance fields: (name, minimum, maximum, default), seconds.
GRACE_FIELDS: tuple[tuple[str, int, int, int], ...] = (
    ("WaitProcessReadCMTime", 5, 90, 30),
    ("WaitDeviceResetTime", 60, 180, 150),
    ("WaitFaultSelfHealingTime", 1, 30, 15),
)
FREQUENCY_LEVELS = frozenset(L) - {L.NormalNPU}
DURATION_LEVELS = FREQUENCY_LEVELS - {L.ManuallySeparateNPU}
NETWORK_RULE_LEVELS = frozenset({L.NotHandleFault, L.SubHealthFault, L.PreSeparateNPU, L.SeparateNPU})

R = TypeVar("R")

# Each section's numbers and their ranges, in the order Huawei checks them.
_FREQUENCY_RANGES = (("TimeWindow", TIME_WINDOW), ("ReleaseTimeWindow", RELEASE_WINDOW), ("Times", TIMES))
_DURATION_RANGES = (("FaultTimeout", FAULT_TIMEOUT), ("RecoverTimeout", RECOVER_TIMEOUT))

_FREQUENCY_FIELDS = ("EventId", "TimeWindow", "Times", "FaultHandling", "ReleaseTimeWindow")
_DURATION_FIELDS = ("EventId", "FaultTimeout", "RecoverTimeout", "FaultHandling")


@dataclass(frozen=True)
class GraceTolerance:
    """Huawei's grace-tolerance waits, in seconds (they serve hot reset; shown by ``doctor``)."""

    WaitProcessReadCMTime: int = 30
    WaitDeviceResetTime: int = 150
    WaitFaultSelfHealingTime: int = 15


@dataclass(frozen=True)
class FrequencyRule:
    """One code's FaultFrequency: ``times`` occurrences within ``time_window`` seconds escalate it."""

    time_window: int
    times: int
    handling: FaultLevel
    release_window: int = NEVER  # seconds clear before the escalation is lifted; NEVER: only by hand

    @property
    def releases(self) -> bool:
        """Whether the escalation lifts by itself."""
        return self.release_window < NEVER


@dataclass(frozen=True)
class DurationRule:
    """One code's FaultDuration: present longer than ``fault_timeout`` seconds escalates it."""

    fault_timeout: int
    recover_timeout: int
    handling: FaultLevel


@dataclass(frozen=True)
class FaultCustomization:
    """A ``faultCustomization.json``: the waits and the rules per code."""

    grace: GraceTolerance = GraceTolerance()
    frequency: Mapping[int, FrequencyRule] = field(default_factory=lambda: MappingProxyType({}))
    duration: Mapping[int, DurationRule] = field(default_factory=lambda: MappingProxyType({}))
    spellings: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def drops_accompanying_faults(self) -> bool:
        """Whether AI Core/Vector bus errors within 5 s of an HBM multi-bit error are dropped.

        Huawei ties this to a FaultDuration entry for 80E01801 existing.
        """
        return HBM_MULTI_BIT in self.duration

    @property
    def autofill_release_window(self) -> int | None:
        """Seconds after which a separation read back without its reason is lifted (None: never).

        Huawei's rule for chips named in ManuallySeparateNPU with no recorded
        reason: the longest ReleaseTimeWindow any FaultFrequency entry sets.
        """
        windows = [rule.release_window for rule in self.frequency.values() if rule.releases]
        return max(windows, default=None)

    def with_frequency(self, rules: Mapping[int, FrequencyRule]) -> FaultCustomization:
        """This customization with ``rules`` replacing the FaultFrequency of their codes."""
        return FaultCustomization(
            self.grace, MappingProxyType({**self.frequency, **rules}), self.duration, self.spellings
        )


def _grace(value: object, source: str, notes: list[ConfigNote]) -> GraceTolerance:
    names = [name for name, *_ in GRACE_FIELDS]
    matched = fields(value if value is not None else {}, names, source, "GraceTolerance", notes)
    chosen: dict[str, int] = {}
    for name, low, high, default in GRACE_FIELDS:
        given = matched.get(name)
        number = default if given is None else go_int(given, source, f"GraceTolerance.{name}")
        if not low <= number <= high:
            why = f"{number} is out of range {low}-{high}; the default {default} is used"
            notes.append(ConfigNote(source, f"GraceTolerance.{name}", why, error=True))
            number = default
        chosen[name] = number
    return GraceTolerance(**chosen)


def _level(name: str, allowed: frozenset[FaultLevel]) -> FaultLevel | None:
    level = FaultLevel.__members__.get(name)
    return level if level in allowed else None


@dataclass(frozen=True)
class _Entry:
    """One FaultFrequency or FaultDuration entry, its fields matched."""

    named: str  # "FaultFrequency[2] (EventId 81078603)"
    matched: dict[str, object]
    ids: list[str]

    def numbers(self, names: tuple[str, ...], source: str) -> dict[str, int]:
        return {name: go_int(self.matched.get(name), source, f"{self.named}.{name}") for name in names}

    def handling(self, source: str) -> str:
        return go_string(self.matched.get("FaultHandling"), source, f"{self.named}.FaultHandling")


def _entries(
    value: object, section: str, names: tuple[str, ...], source: str, notes: list[ConfigNote]
) -> list[_Entry]:
    entries = []
    for index, item in enumerate(go_array(value, source, section)):
        where = f"{section}[{index}]"
        matched = fields(item, names, source, where, notes)
        ids = go_strings(matched.get("EventId"), source, f"{where}.EventId")
        entries.append(_Entry(f"{where} (EventId {', '.join(ids)})" if ids else where, matched, ids))
    return entries


class _Rules(Generic[R]):
    """The rules of one section, per code: the first valid entry naming a code governs it."""

    def __init__(self, section: str, source: str, notes: list[ConfigNote], spellings: dict[int, str]) -> None:
        self.section, self.source, self.notes, self.spellings = section, source, notes, spellings
        self.rules: dict[int, R] = {}

    def admit(self, entry: _Entry, problem: str | None) -> list[int]:
        """The codes ``entry`` governs: none when it has a ``problem`` (noted), else its new ones."""
        if problem is not None:
            self.notes.append(ConfigNote(self.source, entry.named, f"{problem}; the entry is ignored"))
            return []
        admitted = []
        for text in entry.ids:
            code = parse_code(text)
            if code is None:
                why = f"EventId {shown(text)} is not a hex fault code like '80E01801'; skipped"
                self.notes.append(ConfigNote(self.source, entry.named, why))
            elif code in self.rules:
                why = f"{code:X} already has a {self.section} entry; skipped here"
                self.notes.append(ConfigNote(self.source, entry.named, why))
            elif code not in admitted:
                self.spellings.setdefault(code, text.lower())
                admitted.append(code)
        return admitted

    def network_level(
        self, entry: _Entry, code: int, level: FaultLevel, allowed: frozenset[FaultLevel]
    ) -> FaultLevel:
        """``level`` for ``code``, or NotHandleFault (noted) for a network code it means nothing to."""
        if code not in NETWORK_CODES or level in allowed:
            return level
        why = f"{code:X} is a network code, for which {level.name} means nothing; NotHandleFault is used"
        self.notes.append(ConfigNote(self.source, entry.named, why))
        return L.NotHandleFault


def _problem(
    entry: _Entry,
    numbers: Mapping[str, int],
    ranges: tuple[tuple[str, tuple[int, int]], ...],
    handling: str,
    allowed: frozenset[FaultLevel],
    *,
    other: str | None = None,
) -> str | None:
    """What makes ``entry`` unusable, checked in Huawei's order; None when nothing does."""
    if not entry.ids:
        return "it has no EventId"
    for name, (low, high) in ranges:
        if not low <= numbers[name] <= high:
            return f"{name} {numbers[name]} is out of range {low}-{high}"
    if other or _level(handling, allowed) is not None:
        return other
    names = ", ".join(level.name for level in sorted(allowed))
    return f"FaultHandling {shown(handling)} is not one of {names}"


def _frequency(value: object, rules: _Rules[FrequencyRule]) -> None:
    allowed = NETWORK_RULE_LEVELS | {L.ManuallySeparateNPU}
    for entry in _entries(value, "FaultFrequency", _FREQUENCY_FIELDS, rules.source, rules.notes):
        numbers = entry.numbers(("TimeWindow", "Times", "ReleaseTimeWindow"), rules.source)
        release = numbers["ReleaseTimeWindow"] = numbers["ReleaseTimeWindow"] or NEVER
        handling = entry.handling(rules.source)
        level = _level(handling, FREQUENCY_LEVELS)
        unreleased = (
            f"FaultHandling {handling} needs a ReleaseTimeWindow (only ManuallySeparateNPU goes without)"
            if handling != L.ManuallySeparateNPU.name and release == NEVER
            else None
        )
        problem = _problem(entry, numbers, _FREQUENCY_RANGES, handling, FREQUENCY_LEVELS, other=unreleased)
        for code in rules.admit(entry, problem):
            handled = rules.network_level(entry, code, level or L.NotHandleFault, allowed)
            rules.rules[code] = FrequencyRule(numbers["TimeWindow"], numbers["Times"], handled, release)


def _duration(value: object, rules: _Rules[DurationRule]) -> None:
    for entry in _entries(value, "FaultDuration", _DURATION_FIELDS, rules.source, rules.notes):
        numbers = entry.numbers(("FaultTimeout", "RecoverTimeout"), rules.source)
        handling = entry.handling(rules.source)
        level = _level(handling, DURATION_LEVELS)
        problem = _problem(entry, numbers, _DURATION_RANGES, handling, DURATION_LEVELS)
        for code in rules.admit(entry, problem):
            handled = rules.network_level(entry, code, level or L.NotHandleFault, NETWORK_RULE_LEVELS)
            rules.rules[code] = DurationRule(numbers["FaultTimeout"], numbers["RecoverTimeout"], handled)


def parse_customization(text: str, source: str) -> tuple[FaultCustomization, list[ConfigNote]]:
    """A ``faultCustomization.json`` and notes on what was ignored; FaultConfigError if unreadable."""
    notes: list[ConfigNote] = []
    matched = fields(
        load_document(text, source), ("GraceTolerance", "FaultFrequency", "FaultDuration"), source, "", notes
    )
    spellings: dict[int, str] = {}
    grace = _grace(matched.get("GraceTolerance"), source, notes)
    frequency = _Rules[FrequencyRule]("FaultFrequency", source, notes, spellings)
    _frequency(matched.get("FaultFrequency"), frequency)
    duration = _Rules[DurationRule]("FaultDuration", source, notes, spellings)
    _duration(matched.get("FaultDuration"), duration)
    customization = FaultCustomization(
        grace,
        MappingProxyType(frequency.rules),
        MappingProxyType(duration.rules),
        MappingProxyType(spellings),
    )
    return customization, notes
