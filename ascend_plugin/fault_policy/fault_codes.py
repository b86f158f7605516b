"""``faultCode.json``: Huawei's fault-code lists, and the level they give a chip.

The document is one object of lists of hex codes (``"SeparateNPUCodes":
["80E18402", ...]``), one list per level, plus explicit lists for the network
codes. A chip's level is decided as Huawei decides it:

* its network codes (:data:`~.codes.NETWORK_CODES`) are set aside: they make
  the *network* level, from the network lists (unknown: PreSeparateNPU);
* the lists are tried in Huawei's order, Separate, PreSeparate, RestartNPU,
  FreeRestartNPU, RestartBusiness, RestartRequest, SubHealth, NotHandle, and
  the first that holds *any* of the chip's codes decides;
* only when no list holds any of them does severity decide: a code whose last
  event said major or critical (severity 2 or 3), or whose severity is unknown,
  makes the chip SeparateNPU; otherwise (polled codes count as severity 0) it
  is NotHandleFault.

A network code written into a chip list is copied to the network list of the
same level; in a list with no network meaning (RestartRequest, RestartBusiness,
RestartNPU, FreeRestartNPU) it becomes NotHandleFault for the network, with a
note. A code string that is not hex is noted and skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from ascend_plugin.fault_policy.codes import NETWORK_CODES, parse_code, spell
from ascend_plugin.fault_policy.decoding import fields, go_strings, load_document
from ascend_plugin.fault_policy.levels import FaultLevel
from ascend_plugin.fault_policy.problems import ConfigNote
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

# The order Huawei registers spellings in (the first spelling of a code is kept).
_SPELLING_ORDER = (
    "NotHandleFaultCodes", "RestartRequestCodes", "RestartBusinessCodes", "RestartNPUCodes",
    "FreeRestartNPUCodes", "PreSeparateNPUCodes", "SeparateNPUCodes", "NotHandleFaultNetworkCodes",
    "PreSeparateNPUNetworkCodes", "SeparateNPUNetworkCodes", "SubHealthFaultCodes",
    "SubHealthFaultNetworkCodes",
)  # fmt: skip
LIST_KEYS: tuple[str, ...] = _SPELLING_ORDER

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
        """A chip's level from its current codes (network codes aside), as Huawei decides it.

        ``severities`` holds the last severity seen for each code (0 for a
        polled code); a code missing from it, or mapped to None, has none.
        """
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
        notes = []
        for level, codes in self.chip.items():
            if level in NETWORK_LIST_LEVELS:
                continue
            for code in sorted(codes & NETWORK_CODES):
                notes.append(
                    ConfigNote(
                        source,
                        _CHIP_KEY[level],
                        f"{spell(code, self.spellings).upper()} is a network code and {level.name} has no "
                        "meaning for a network: its network level is NotHandleFault",
                    )
                )
        for level, codes in self.explicit_network.items():
            for code in sorted(codes - NETWORK_CODES):
                notes.append(
                    ConfigNote(
                        source,
                        _NETWORK_KEY[level],
                        f"{spell(code, self.spellings).upper()} is not a network code "
                        f"({', '.join(f'{c:X}' for c in sorted(NETWORK_CODES))}); it has no effect here",
                    )
                )
        return notes


def is_fault_code_document(data: Mapping[str, object]) -> bool:
    """Whether ``data`` uses Huawei's list names (any key, in any case)."""
    known = {key.casefold() for key in LIST_KEYS}
    return any(key.casefold() in known for key in data)


def decode_fault_codes(data: Mapping[str, object], source: str) -> tuple[FaultCodeLists, list[ConfigNote]]:
    """The lists of a decoded ``faultCode.json`` and the notes on what was skipped.

    Raises FaultConfigError where Go's decoder would fail: a list that is not
    an array of strings.
    """
    notes: list[ConfigNote] = []
    matched = fields(data, LIST_KEYS, source, "", notes)
    spellings: dict[int, str] = {}
    parsed: dict[str, set[int]] = {}
    for key in _SPELLING_ORDER:
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
