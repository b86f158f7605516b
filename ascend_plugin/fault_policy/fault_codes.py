"""``faultCode.json``, and the plugin's shorter format laid over it: which level a code gives a chip.

The plugin's format (``{"SeparateNPU": ["80E01801"]}``) says only what differs, and is checked
strictly since it is short and written by hand (docs/faults.md "faultCode.json").
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from ascend_plugin.fault_policy.documents import (
    ConfigNote,
    FaultConfigError,
    fields,
    go_strings,
    load_document,
)
from ascend_plugin.fault_policy.faults import NETWORK_CODES, FaultLevel, parse_code, spell
from ascend_plugin.settings import shown

L = FaultLevel

# The chip lists in the order Huawei tries them (most severe first).
CHIP_LISTS: tuple[tuple[str, FaultLevel], ...] = (
    ("SeparateNPUCodes", L.SeparateNPU),
    ("PreSeparateNPUCodes", L.PreSeparateNPU),
    ("RestartNPUCodes", L.RestartNPU),
    ("FreeRestartNPUCodes", L.FreeRestartNPU),
    ("RestartBusinessCodes", L.RestartBusiness),
    ("RestartRequestCodes", L.RestartRequest),
    ("SubHealthFaultCodes", L.SubHealthFault),
    ("NotHandleFaultCodes", L.NotHandleFault),
)
NETWORK_LISTS: tuple[tuple[str, FaultLevel], ...] = (
    ("SeparateNPUNetworkCodes", L.SeparateNPU),
    ("PreSeparateNPUNetworkCodes", L.PreSeparateNPU),
    ("SubHealthFaultNetworkCodes", L.SubHealthFault),
    ("NotHandleFaultNetworkCodes", L.NotHandleFault),
)
CHIP_LIST_LEVELS: tuple[FaultLevel, ...] = tuple(level for _, level in CHIP_LISTS)
NETWORK_LIST_LEVELS: tuple[FaultLevel, ...] = tuple(level for _, level in NETWORK_LISTS)
UNKNOWN_NETWORK_LEVEL = L.PreSeparateNPU
_CHIP_KEY = {level: key for key, level in CHIP_LISTS}
_NETWORK_KEY = {level: key for key, level in NETWORK_LISTS}

# Every list, in the order Huawei registers spellings in (the first spelling of a code is kept).
LIST_KEYS: tuple[str, ...] = (
    "NotHandleFaultCodes", "RestartRequestCodes", "RestartBusinessCodes", "RestartNPUCodes",
    "FreeRestartNPUCodes", "PreSeparateNPUCodes", "SeparateNPUCodes", "NotHandleFaultNetworkCodes",
    "PreSeparateNPUNetworkCodes", "SeparateNPUNetworkCodes", "SubHealthFaultCodes",
    "SubHealthFaultNetworkCodes",
)  # fmt: skip

MINOR = 1  # event severities: 0 hint, 1 minor, 2 major, 3 critical


def _frozen(
    lists: Mapping[FaultLevel, Collection[int]], levels: Iterable[FaultLevel]
) -> Mapping[FaultLevel, frozenset[int]]:
    return MappingProxyType({level: frozenset(lists.get(level, ())) for level in levels})


@dataclass(frozen=True)
class FaultCodeLists:
    """The code lists of one ``faultCode.json``, and the levels they decide."""

    chip: Mapping[FaultLevel, frozenset[int]] = field(default_factory=lambda: _frozen({}, CHIP_LIST_LEVELS))
    explicit_network: Mapping[FaultLevel, frozenset[int]] = field(
        default_factory=lambda: _frozen({}, NETWORK_LIST_LEVELS)
    )
    spellings: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))

    @cached_property
    def network(self) -> Mapping[FaultLevel, frozenset[int]]:
        """The network lists in force: the explicit ones plus the network codes of the chip lists."""
        network = {level: set(self.explicit_network.get(level, ())) for level in NETWORK_LIST_LEVELS}
        for level, codes in self.chip.items():
            for code in codes & NETWORK_CODES:
                network[level if level in network else L.NotHandleFault].add(code)
        return _frozen(network, NETWORK_LIST_LEVELS)

    def list_level(self, code: int) -> FaultLevel | None:
        """The level of the most severe chip list holding ``code``; None when none does."""
        return next((level for level in CHIP_LIST_LEVELS if code in self.chip[level]), None)

    def chip_level(self, codes: Iterable[int], severities: Mapping[int, int | None]) -> FaultLevel:
        """A chip's level from its current codes (network codes aside), as Huawei decides it; ``severities``:
        each code's last severity (0 polled; missing or None: none)."""
        chip_codes = [code for code in codes if code not in NETWORK_CODES]
        if not chip_codes:
            return L.NormalNPU
        for level in CHIP_LIST_LEVELS:
            if not self.chip[level].isdisjoint(chip_codes):
                return level
        for code in chip_codes:
            severity = severities.get(code)
            if severity is None or severity > MINOR:
                return L.SeparateNPU
        return L.NotHandleFault

    def network_level(self, codes: Iterable[int]) -> FaultLevel:
        """A chip's network level from its current network codes."""
        network_codes = [code for code in codes if code in NETWORK_CODES]
        if not network_codes:
            return L.NormalNPU
        for level in NETWORK_LIST_LEVELS:
            if not self.network[level].isdisjoint(network_codes):
                return level
        return UNKNOWN_NETWORK_LEVEL

    def with_overlay(self, levels: Mapping[int, FaultLevel]) -> FaultCodeLists:
        """These lists with each code of ``levels`` moved to the list of its level (a list level)."""
        outside = sorted(
            {level.name for level in levels.values()} - {level.name for level in CHIP_LIST_LEVELS}
        )
        if outside:
            raise ValueError(f"levels without a code list: {', '.join(outside)}")
        chip = {level: set(codes) - levels.keys() for level, codes in self.chip.items()}
        for code, level in levels.items():
            chip[level].add(code)
        return FaultCodeLists(_frozen(chip, CHIP_LIST_LEVELS), self.explicit_network, self.spellings)

    def network_notes(self, source: str) -> list[ConfigNote]:
        """Notes on network codes in lists without a network meaning, and other codes in network lists."""
        notes = [
            ConfigNote(
                source,
                _CHIP_KEY[level],
                f"{spell(code, self.spellings).upper()} is a network code and {level.name} has no "
                "meaning for a network: its network level is NotHandleFault",
            )
            for level, codes in self.chip.items()
            if level not in NETWORK_LIST_LEVELS
            for code in sorted(codes & NETWORK_CODES)
        ]
        network = ", ".join(f"{code:X}" for code in sorted(NETWORK_CODES))
        notes += [
            ConfigNote(
                source,
                _NETWORK_KEY[level],
                f"{spell(code, self.spellings).upper()} is not a network code ({network}); "
                "it has no effect here",
            )
            for level, codes in self.explicit_network.items()
            for code in sorted(codes - NETWORK_CODES)
        ]
        return notes


def is_fault_code_document(data: Mapping[str, object]) -> bool:
    """Whether ``data`` uses Huawei's list names (any key, in any case)."""
    known = {key.casefold() for key in LIST_KEYS}
    return any(key.casefold() in known for key in data)


def decode_fault_codes(data: Mapping[str, object], source: str) -> tuple[FaultCodeLists, list[ConfigNote]]:
    """The lists of a decoded ``faultCode.json`` and the notes on what was skipped (a code not in hex)."""
    notes: list[ConfigNote] = []
    matched = fields(data, LIST_KEYS, source, "", notes)
    spellings: dict[int, str] = {}
    parsed: dict[str, set[int]] = {}
    for key in LIST_KEYS:
        codes = parsed[key] = set()
        for text in go_strings(matched.get(key), source, key):
            code = parse_code(text)
            if code is None:
                notes.append(
                    ConfigNote(source, key, f"{shown(text)} is not a hex fault code like '80E01801'; skipped")
                )
                continue
            codes.add(code)
            spellings.setdefault(code, text.lower())
    lists = FaultCodeLists(
        _frozen({level: parsed[key] for key, level in CHIP_LISTS}, CHIP_LIST_LEVELS),
        _frozen({level: parsed[key] for key, level in NETWORK_LISTS}, NETWORK_LIST_LEVELS),
        MappingProxyType(spellings),
    )
    return lists, notes + lists.network_notes(source)


def parse_fault_codes(text: str, source: str) -> tuple[FaultCodeLists, list[ConfigNote]]:
    """The lists of a ``faultCode.json`` text; FaultConfigError when it cannot be read at all."""
    return decode_fault_codes(load_document(text, source), source)


MAX_OVERLAY_CODE = 0xFFFFFFFFF  # nine hex digits, the longest codes Huawei ships


def decode_overlay(data: object, source: str) -> dict[int, FaultLevel]:
    """``{"LevelName": ["80E01801", ...]}`` -> {code: level}; ``_`` keys are comments."""
    if not isinstance(data, dict):
        raise FaultConfigError(f"{source}: expected an object of level -> list of hex codes")
    allowed = ", ".join(level.name for level in FaultLevel)
    result: dict[int, FaultLevel] = {}
    for name, codes in data.items():
        if name.startswith("_"):
            continue
        if name not in FaultLevel.__members__:
            raise FaultConfigError(f"{source}: unknown fault level {shown(name)}; allowed: {allowed}")
        if not isinstance(codes, list):
            raise FaultConfigError(
                f"{source}: {name} must be a list of hex codes, not {type(codes).__name__}"
            )
        for text in codes:
            spelled = str(text)
            code = parse_code(spelled[2:] if spelled[:2].lower() == "0x" else spelled)
            if code is None:
                raise FaultConfigError(
                    f"{source}: {name}: {shown(text)} is not a hex fault code like '80E01801'"
                )
            if code > MAX_OVERLAY_CODE:
                raise FaultConfigError(f"{source}: {name}: {shown(text)} is out of range")
            result[code] = FaultLevel[name]
    return result
