"""What can be wrong with a fault configuration, and how it is reported.

Huawei's plugin is forgiving with its files, and so is this one: a bad code
string, an entry out of range or an unknown key is skipped with a note naming
it, and the rest of the file applies. Only a document that cannot be read at
all (malformed JSON, a value of the wrong type where Go's decoder would fail)
is refused as a whole, with a :class:`FaultConfigError`; the caller then keeps
what it last read of that file, or falls back to the file below it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ascend_plugin.settings import SettingsError


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


# Notes logged for one document at most; a file of ten thousand bad codes says so in a line, not 10,000.
NOTES_LOGGED = 20


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
