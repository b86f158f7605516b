"""Picking log lines by what they are about, not by how they are worded.

The plugin puts a line's context in structured fields (``extra={...}``: ``device``,
``part``, ``attempt``, ``error``, ... the keys of docs/operations.md "Structured
logs"). A test about what the plugin did (a chip marked out, a retry, a refusal,
a fallback) picks its lines by logger, level and those fields, so rewording a
message breaks no test and a line that loses its fields does. Prose is asserted
only where the wording is the product, and then as the facts an operator acts
on (the setting to change, the value, the rule to add), not as whole sentences.

:func:`records` reads the records pytest's ``caplog`` captured in this process;
:func:`lines` reads the JSON lines of a plugin process (``--log-format json``),
whose fields are top-level keys beside ``level``, ``logger`` and ``msg``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

_ABSENT = object()


def records(
    caplog: pytest.LogCaptureFixture, logger: str, *, level: int | None = None, **fields: Any
) -> list[logging.LogRecord]:
    """The captured records of ``logger`` (at ``level``, if given) whose fields equal ``fields``."""
    return [
        record
        for record in caplog.records
        if record.name == logger
        and (level is None or record.levelno == level)
        and all(getattr(record, key, _ABSENT) == value for key, value in fields.items())
    ]


def fields(record: logging.LogRecord, *keys: str) -> dict[str, Any]:
    """The structured fields ``keys`` of ``record``; a field the line lacks is absent from the answer."""
    return {key: getattr(record, key) for key in keys if hasattr(record, key)}


def lines(
    entries: Iterable[Mapping[str, Any]], logger: str, *, level: str | None = None, **fields: Any
) -> list[Mapping[str, Any]]:
    """The JSON log lines of ``logger`` (at ``level``, e.g. ``"ERROR"``) whose keys equal ``fields``."""
    return [
        entry
        for entry in entries
        if entry.get("logger") == logger
        and (level is None or entry.get("level") == level)
        and all(entry.get(key, _ABSENT) == value for key, value in fields.items())
    ]
