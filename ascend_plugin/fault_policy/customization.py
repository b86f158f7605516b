"""``faultCustomization.json``: GraceTolerance, FaultFrequency and FaultDuration, with Huawei's ranges.

A bad entry is ignored with a note; a code in several entries follows the first valid one
(docs/faults.md "faultCustomization.json").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

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
        return self.release_window < NEVER


@dataclass(frozen=True)
class DurationRule:
    """One code's FaultDuration: present longer than ``fault_timeout`` seconds escalates it."""

    fault_timeout: int
    recover_timeout: int
    handling: FaultLevel


@dataclass(frozen=True)
class FaultCustomization:
    grace: GraceTolerance = GraceTolerance()
    frequency: Mapping[int, FrequencyRule] = field(default_factory=lambda: MappingProxyType({}))
    duration: Mapping[int, DurationRule] = field(default_factory=lambda: MappingProxyType({}))
    spellings: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def drops_accompanying_faults(self) -> bool:
        """Whether AI Core/Vector bus errors within 5 s of an HBM multi-bit error are dropped: Huawei
        ties it to a FaultDuration entry for 80E01801."""
        return HBM_MULTI_BIT in self.duration

    @property
    def autofill_release_window(self) -> int | None:
        """Seconds after which a separation read back without its reason is lifted (None: never): the
        longest ReleaseTimeWindow of any FaultFrequency entry, as Huawei."""
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


@dataclass(frozen=True)
class _Section:
    """How the entries of a FaultFrequency or FaultDuration section are read."""

    name: str
    fields: tuple[str, ...]
    numbers: tuple[str, ...]  # in the order Go decodes them
    ranges: tuple[tuple[str, tuple[int, int]], ...]  # in the order Huawei checks them
    levels: frozenset[FaultLevel]  # what FaultHandling may say
    network_levels: frozenset[FaultLevel]  # what it may say for a network code (else NotHandleFault)


_FREQUENCY = _Section(
    "FaultFrequency",
    ("EventId", "TimeWindow", "Times", "FaultHandling", "ReleaseTimeWindow"),
    ("TimeWindow", "Times", "ReleaseTimeWindow"),
    (("TimeWindow", TIME_WINDOW), ("ReleaseTimeWindow", RELEASE_WINDOW), ("Times", TIMES)),
    FREQUENCY_LEVELS,
    NETWORK_RULE_LEVELS | {L.ManuallySeparateNPU},
)
_DURATION = _Section(
    "FaultDuration",
    ("EventId", "FaultTimeout", "RecoverTimeout", "FaultHandling"),
    ("FaultTimeout", "RecoverTimeout"),
    (("FaultTimeout", FAULT_TIMEOUT), ("RecoverTimeout", RECOVER_TIMEOUT)),
    DURATION_LEVELS,
    NETWORK_RULE_LEVELS,
)


def _entries(
    section: _Section, value: object, source: str, notes: list[ConfigNote], spellings: dict[int, str]
) -> Iterator[tuple[int, FaultLevel, dict[str, int]]]:
    """Each code a valid entry governs (the first naming it), with its level and the entry's numbers;
    a bad entry, a code not hex or already governed, a level meaningless for a network code: noted."""
    governed: set[int] = set()
    for index, item in enumerate(go_array(value, source, section.name)):
        where = f"{section.name}[{index}]"
        matched = fields(item, section.fields, source, where, notes)
        ids = go_strings(matched.get("EventId"), source, f"{where}.EventId")
        named = f"{where} (EventId {', '.join(ids)})" if ids else where
        numbers = {name: go_int(matched.get(name), source, f"{named}.{name}") for name in section.numbers}
        if "ReleaseTimeWindow" in numbers:
            numbers["ReleaseTimeWindow"] = numbers["ReleaseTimeWindow"] or NEVER
        handling = go_string(matched.get("FaultHandling"), source, f"{named}.FaultHandling")
        problem = _problem(section, ids, numbers, handling)
        if problem is not None:
            notes.append(ConfigNote(source, named, f"{problem}; the entry is ignored"))
            continue
        admitted: list[int] = []
        for text in ids:
            code = parse_code(text)
            if code is None:
                why = f"EventId {shown(text)} is not a hex fault code like '80E01801'; skipped"
                notes.append(ConfigNote(source, named, why))
            elif code in governed:
                why = f"{code:X} already has a {section.name} entry; skipped here"
                notes.append(ConfigNote(source, named, why))
            elif code not in admitted:
                spellings.setdefault(code, text.lower())
                admitted.append(code)
        governed.update(admitted)
        level = FaultLevel[handling]
        for code in admitted:
            if code in NETWORK_CODES and level not in section.network_levels:
                why = f"{code:X} is a network code, for which {level.name} means nothing"
                notes.append(ConfigNote(source, named, f"{why}; NotHandleFault is used"))
                yield code, L.NotHandleFault, numbers
            else:
                yield code, level, numbers


def _problem(section: _Section, ids: list[str], numbers: Mapping[str, int], handling: str) -> str | None:
    """What makes an entry unusable, checked in Huawei's order; None when nothing does."""
    if not ids:
        return "it has no EventId"
    for name, (low, high) in section.ranges:
        if not low <= numbers[name] <= high:
            return f"{name} {numbers[name]} is out of range {low}-{high}"
    if numbers.get("ReleaseTimeWindow") == NEVER and handling != L.ManuallySeparateNPU.name:
        return f"FaultHandling {handling} needs a ReleaseTimeWindow (only ManuallySeparateNPU goes without)"
    if FaultLevel.__members__.get(handling) in section.levels:
        return None
    names = ", ".join(level.name for level in sorted(section.levels))
    return f"FaultHandling {shown(handling)} is not one of {names}"


def parse_customization(text: str, source: str) -> tuple[FaultCustomization, list[ConfigNote]]:
    """A ``faultCustomization.json`` and notes on what was ignored; FaultConfigError if unreadable."""
    notes: list[ConfigNote] = []
    matched = fields(
        load_document(text, source), ("GraceTolerance", "FaultFrequency", "FaultDuration"), source, "", notes
    )
    spellings: dict[int, str] = {}
    grace = _grace(matched.get("GraceTolerance"), source, notes)
    frequency = {
        code: FrequencyRule(numbers["TimeWindow"], numbers["Times"], level, numbers["ReleaseTimeWindow"])
        for code, level, numbers in _entries(
            _FREQUENCY, matched.get("FaultFrequency"), source, notes, spellings
        )
    }
    duration = {
        code: DurationRule(numbers["FaultTimeout"], numbers["RecoverTimeout"], level)
        for code, level, numbers in _entries(
            _DURATION, matched.get("FaultDuration"), source, notes, spellings
        )
    }
    customization = FaultCustomization(
        grace, MappingProxyType(frequency), MappingProxyType(duration), MappingProxyType(spellings)
    )
    return customization, notes
