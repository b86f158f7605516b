"""Reading a fault configuration document as Huawei's Go code reads it, and noting what is skipped.

A value of the wrong type fails the whole document (:class:`FaultConfigError`), as Go's decoder
does; anything else wrong is skipped with a :class:`ConfigNote` (docs/faults.md "Messages").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ascend_plugin.fault_policy.faults import INT64_MAX
from ascend_plugin.settings import SHOWN, SettingsError, cut, shown

INT64_MIN = -(1 << 63)
NOTES_LOGGED = 20  # notes logged per document: ten thousand bad codes say so in a line, not 10,000


class FaultConfigError(SettingsError):
    """A fault configuration document that cannot be used at all; the message says where and why."""


@dataclass(frozen=True)
class ConfigNote:
    """One thing in a fault configuration that was skipped or replaced, and why."""

    source: str  # the document: "built-in faultCode.json", "faultCode.json of kube-system/..."
    entry: str  # where in it: "SeparateNPUCodes", "FaultFrequency[2]", "PollInterval"
    message: str  # what was wrong, the value, and what happens instead
    error: bool = False  # Huawei logs these as errors (a value replaced by a default), not warnings

    def __str__(self) -> str:
        return f"{self.source}: {self.entry}: {self.message}"


def log_notes(notes: Iterable[ConfigNote], logger: logging.Logger) -> None:
    """Log each note once (source and entry as structured fields); past :data:`NOTES_LOGGED`, a count."""
    left = list(notes)
    for note in left[:NOTES_LOGGED]:
        logger.log(
            logging.ERROR if note.error else logging.WARNING,
            "%s",
            note,
            extra={"source": note.source, "entry": note.entry},
        )
    if len(left) > NOTES_LOGGED:
        logger.warning(
            "%d more problems of the same configuration are not logged",
            len(left) - NOTES_LOGGED,
            extra={"source": left[NOTES_LOGGED].source},
        )


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str, source: str) -> object:
    """The JSON value ``text`` holds (no NaN or Infinity, which Go refuses); FaultConfigError if none."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:  # json.JSONDecodeError is a ValueError
        raise FaultConfigError(f"{source} is not valid JSON: {error}") from None
    except RecursionError:  # nested deeper than Python's parser goes
        raise FaultConfigError(f"{source} nests arrays or objects too deeply to be read") from None


def load_document(text: str, source: str) -> Mapping[str, object]:
    """The JSON object ``text`` holds; FaultConfigError naming ``source`` and why it is not one."""
    data = parse_json(text, source)
    if not isinstance(data, dict):
        raise FaultConfigError(f"{source} must be a JSON object, not {_json_type(data)}")
    return data


def fields(
    value: object, names: Sequence[str], source: str, where: str, notes: list[ConfigNote]
) -> dict[str, object]:
    """``value``'s entries under the field names they match; an unknown key is noted and left out;
    FaultConfigError when ``value`` (``where`` in the document, "" for the top) is not an object."""
    if not isinstance(value, dict):
        raise FaultConfigError(
            f"{source}: {where or 'the document'} must be an object, not {_json_type(value)}"
        )
    by_fold = {name.casefold(): name for name in names}
    matched: dict[str, object] = {}
    for key, item in value.items():
        name = by_fold.get(key.casefold())
        if name is None:
            allowed = ", ".join(names)
            entry = cut(f"{where}.{key}" if where else key)
            notes.append(
                ConfigNote(source, entry, f"unknown key {shown(key)} is ignored; known keys: {allowed}")
            )
            continue
        matched[name] = item
    return matched


def go_int(value: object, source: str, where: str) -> int:
    """A JSON integer as Go reads it into an int64 (``null``: 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultConfigError(f"{source}: {where} must be a whole number, not {_json_shown(value)}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise FaultConfigError(f"{source}: {where} {value} does not fit in a 64-bit integer")
    return value


def go_string(value: object, source: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FaultConfigError(f"{source}: {where} must be a string, not {_json_shown(value)}")
    return value


def go_strings(value: object, source: str, where: str) -> list[str]:
    return [
        go_string(item, source, f"{where}[{index}]")
        for index, item in enumerate(go_array(value, source, where))
    ]


def go_array(value: object, source: str, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FaultConfigError(f"{source}: {where} must be an array, not {_json_type(value)}")
    return value


def _json_shown(value: object) -> str:
    """A JSON value as a message names it: a scalar as JSON writes it (a long string cut), else its type."""
    if isinstance(value, list | dict):
        return _json_type(value)
    if isinstance(value, str) and len(value) > SHOWN:
        return f"{json.dumps(value[:SHOWN])}... ({len(value)} characters)"
    return json.dumps(value)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
