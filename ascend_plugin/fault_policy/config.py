"""The fault configuration in force: Huawei's ConfigMap over the operator's file over the built-ins.

Fallbacks: docs/faults.md "Where the configuration comes from". The built-in ``data/`` files are Huawei's,
unchanged (``Ascend/mind-cluster`` ``component/ascend-device-plugin/build/`` at commit
22bb3d987bc0208c3eb7395e222b661276133c58, 2026-08-21).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from ascend_plugin.fault_policy.customization import (
    NEVER,
    TIME_WINDOW,
    FaultCustomization,
    FrequencyRule,
    parse_customization,
)
from ascend_plugin.fault_policy.documents import ConfigNote, FaultConfigError, log_notes, parse_json
from ascend_plugin.fault_policy.fault_codes import (
    FaultCodeLists,
    decode_fault_codes,
    decode_overlay,
    is_fault_code_document,
    parse_fault_codes,
)
from ascend_plugin.fault_policy.faults import FaultLevel, spell
from ascend_plugin.settings import shown

log = logging.getLogger(__name__)

T = TypeVar("T")

CONFIGMAP_NAMESPACE = "kube-system"  # Huawei's plugin reads it there only
CONFIGMAP_NAME = "mindx-dl-fault-config"
FAULT_CODE_KEY = "faultCode.json"
CUSTOMIZATION_KEY = "faultCustomization.json"
POLL_INTERVAL_KEY = "PollInterval"
POLL_INTERVAL_DEFAULT = 300
POLL_INTERVAL_RANGE = (30, 3600)
_GO_ATOI = re.compile(r"[+-]?[0-9]+")

_PARTS = (FAULT_CODE_KEY, CUSTOMIZATION_KEY)
BUILTIN_FAULT_CODES = "built-in faultCode.json"
BUILTIN_CUSTOMIZATION = "built-in faultCustomization.json"


@dataclass(frozen=True)
class BaseConfig:
    """What applies where Huawei's ConfigMap says nothing: the operator's file and the built-ins."""

    codes: FaultCodeLists
    codes_source: str
    customization: FaultCustomization
    overlay: Mapping[int, FaultLevel] = field(default_factory=lambda: MappingProxyType({}))
    overlay_source: str | None = None


@cache
def builtin_codes() -> FaultCodeLists:
    return parse_fault_codes(_builtin("faultCode.json"), BUILTIN_FAULT_CODES)[0]


@cache
def builtin_customization() -> FaultCustomization:
    return parse_customization(_builtin("faultCustomization.json"), BUILTIN_CUSTOMIZATION)[0]


def _builtin(name: str) -> str:
    return resources.files("ascend_plugin").joinpath(f"data/{name}").read_text(encoding="utf-8")


def base_config(levels_file: Path | None) -> BaseConfig:
    """The base for ``fault_levels_file`` = ``levels_file``; FaultConfigError if unusable. A file with
    Huawei's list names is a ``faultCode.json`` and replaces the built-in lists (as Huawei's
    ``/usr/local/faultCode.json``); otherwise it is the plugin's format, laid over them."""
    if levels_file is None:
        return BaseConfig(builtin_codes(), BUILTIN_FAULT_CODES, builtin_customization())
    source = f"fault-level file {levels_file}"
    try:
        text = levels_file.read_text(encoding="utf-8")
    except OSError as error:
        raise FaultConfigError(f"cannot read fault-level file {levels_file}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise FaultConfigError(f"fault-level file {levels_file} is not UTF-8 text: {error}") from error
    data = parse_json(text, source)
    if not isinstance(data, dict) or not is_fault_code_document(data):
        overlay = MappingProxyType(decode_overlay(data, source))
        return BaseConfig(builtin_codes(), BUILTIN_FAULT_CODES, builtin_customization(), overlay, source)
    if mixed := sorted(key for key in data if key in FaultLevel.__members__):
        raise FaultConfigError(
            f"{source} mixes Huawei's list names with the plugin's level names ({', '.join(mixed)}): "
            "write either faultCode.json's lists (SeparateNPUCodes ...) or level names, not both"
        )
    lists, notes = decode_fault_codes(data, source)
    log_notes(notes, log)
    return BaseConfig(lists, source, builtin_customization())


@dataclass(frozen=True)
class LastRead:
    """The ConfigMap's files as last read whole: what a change of one that cannot be read falls back to."""

    codes: FaultCodeLists | None = None
    customization: FaultCustomization | None = None


@dataclass(frozen=True)
class FaultConfig:
    """The fault configuration in force, and where each part of it came from."""

    codes: FaultCodeLists
    customization: FaultCustomization
    poll_interval: int = POLL_INTERVAL_DEFAULT
    # part ("faultCode.json", "faultCustomization.json", "PollInterval", "overlay") -> its source
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[ConfigNote, ...] = ()
    read: LastRead = LastRead()  # the ConfigMap's files as last read whole (for the next configuration)

    @cached_property
    def _spellings(self) -> Mapping[int, str]:
        return {**self.customization.spellings, **self.codes.spellings}

    def spell(self, code: int) -> str:
        """``code`` as the configuration first spelled it (lower-case), Huawei's way."""
        return spell(code, self._spellings)

    def origin(self) -> str:
        """Where each part came from, as the watcher logs it and ``doctor`` shows it."""
        parts = [f"{part} from {self.sources[part]}" for part in _PARTS if part in self.sources]
        parts.append(
            f"{POLL_INTERVAL_KEY} {self.poll_interval} s ({self.sources.get(POLL_INTERVAL_KEY, 'default')})"
        )
        if overlay := self.sources.get("overlay"):
            parts.append(f"levels changed by {overlay}")
        return "; ".join(parts)


def parse_poll_interval(text: str | None, source: str) -> tuple[int, ConfigNote | None]:
    """``PollInterval`` in seconds, as Huawei reads it (``strconv.Atoi``, 30-3600, else 300)."""
    if text is None:
        return POLL_INTERVAL_DEFAULT, None
    low, high = POLL_INTERVAL_RANGE
    if not _GO_ATOI.fullmatch(text):
        why = f"{shown(text)} is not a whole number of seconds"
    elif not low <= int(text) <= high:
        why = f"{int(text)} is out of range {low}-{high}"
    else:
        return int(text), None
    return POLL_INTERVAL_DEFAULT, ConfigNote(
        source, POLL_INTERVAL_KEY, f"{why}; the default {POLL_INTERVAL_DEFAULT} is used", error=True
    )


def fault_config(
    base: BaseConfig,
    configmap: Mapping[str, str] | None,
    *,
    where: str = f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}",
    overlay: Mapping[int, FaultLevel] | None = None,
    overlay_source: str | None = None,
    last: LastRead = LastRead(),
) -> FaultConfig:
    """The configuration for ``configmap``'s data (None: no such ConfigMap) over ``base``, with
    ``overlay`` (the config ConfigMap's ``fault_levels.json``) over the base's own; ``last``: what the
    configuration before read of the ConfigMap's files. Notes are logged and kept in the result."""
    notes: list[ConfigNote] = []

    def part(
        key: str, parse: Callable[[str, str], tuple[T, list[ConfigNote]]], base: tuple[T, str, T | None]
    ) -> tuple[T, T | None, str]:
        """One file: the key's content, else its last content read whole, else the base's; with what was
        read whole of the key (for the next configuration) and where the file came from."""
        fallback, fallback_source, last_read = base
        text = None if configmap is None else configmap.get(key)
        if text is None:
            if configmap is not None:
                notes.append(
                    ConfigNote(where, key, f"the ConfigMap has no {key} key; {fallback_source} applies")
                )
            return fallback, None, fallback_source
        source = f"{key} of {where}"
        try:
            value, found = parse(text, source)
        except FaultConfigError as error:
            if last_read is None:
                notes.append(
                    ConfigNote(where, key, f"{error}; {fallback_source} applies instead", error=True)
                )
                return fallback, None, fallback_source
            notes.append(ConfigNote(where, key, f"{error}; its last content read stays in force", error=True))
            return last_read, last_read, f"{source}, as last read (its current content cannot be read)"
        notes.extend(found)
        return value, value, source

    codes, codes_read, codes_source = part(
        FAULT_CODE_KEY, parse_fault_codes, (base.codes, base.codes_source, last.codes)
    )
    customization, customization_read, customization_source = part(
        CUSTOMIZATION_KEY,
        parse_customization,
        (base.customization, BUILTIN_CUSTOMIZATION, last.customization),
    )
    interval, note = parse_poll_interval(
        None if configmap is None else configmap.get(POLL_INTERVAL_KEY), where
    )
    notes.extend([note] if note else [])
    has_interval = configmap is not None and POLL_INTERVAL_KEY in configmap and note is None
    sources = {
        FAULT_CODE_KEY: codes_source,
        CUSTOMIZATION_KEY: customization_source,
        POLL_INTERVAL_KEY: f"{POLL_INTERVAL_KEY} of {where}" if has_interval else "default",
    }
    layered = {**base.overlay, **(overlay or {})}
    if layered:
        codes, customization = apply_overlay(codes, customization, layered)
        sources["overlay"] = ", ".join(s for s in (base.overlay_source, overlay_source) if s)
    log_notes(notes, log)
    read = LastRead(codes_read, customization_read)
    return FaultConfig(codes, customization, interval, MappingProxyType(sources), tuple(notes), read)


def apply_overlay(
    codes: FaultCodeLists, customization: FaultCustomization, overlay: Mapping[int, FaultLevel]
) -> tuple[FaultCodeLists, FaultCustomization]:
    """The lists and customization once ``overlay`` is laid over them: NormalNPU reads as NotHandleFault;
    ManuallySeparateNPU becomes Huawei's FaultFrequency entry with Times 1 that never releases."""
    manual = [code for code, level in overlay.items() if level is FaultLevel.ManuallySeparateNPU]
    listed = {
        code: {
            FaultLevel.NormalNPU: FaultLevel.NotHandleFault,
            FaultLevel.ManuallySeparateNPU: FaultLevel.SeparateNPU,
        }.get(level, level)
        for code, level in overlay.items()
    }
    first_occurrence = FrequencyRule(TIME_WINDOW[0], 1, FaultLevel.ManuallySeparateNPU, NEVER)
    rules = MappingProxyType(dict.fromkeys(manual, first_occurrence))
    return codes.with_overlay(listed), customization.with_frequency(rules) if rules else customization
