"""What a check reports: the same five fields for every check, so the text, JSON and exit code agree.

A check whose groundwork failed raises :func:`unmet`, one that does not apply
here :class:`NotApplicable`: either is reported skipped with the reason, so one
root cause shows up as one problem rather than a cascade of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ascend_plugin.settings import how_to_set

__all__ = ["DoctorError", "Finding", "Guide", "NotApplicable", "Status", "how_to_set", "listing", "unmet"]


class Guide(StrEnum):
    """The section of docs/operations.md that explains a deployment failure a finding names.

    An operator reading a problem in a pod's terminal gets the place to read on, not a number
    that means something only to whoever wrote the check.
    """

    AI_CORES = "docs/operations.md#ai-core-bounds"
    BOARD_FILES = "docs/operations.md#board-files-mounted-as-files"
    SHARED_MEMORY = "docs/operations.md#the-hosts-shared-memory"
    GLIBC = "docs/operations.md#the-librarys-glibc"
    RBAC = "docs/operations.md#permissions"
    NODE_IDENTITY = "docs/operations.md#node-name-and-host-ip"
    FAULT_CONFIG = "docs/faults.md#where-the-configuration-comes-from"


class Status(StrEnum):
    """How a check came out; the JSON report carries the value."""

    OK = "ok"
    PROBLEM = "problem"
    SKIPPED = "skipped"
    WARNING = "warning"  # worth knowing and fixing, but the plugin serves: the run still passes


@dataclass(frozen=True)
class Finding:
    """One line of the report: what was checked, how it came out, and how to fix it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    see: Guide | None = None  # where the docs explain this failure

    @classmethod
    def ok(cls, name: str, detail: str) -> Finding:
        return cls(name, Status.OK, detail)

    @classmethod
    def problem(cls, name: str, detail: str, fix: str, see: Guide | None = None) -> Finding:
        return cls(name, Status.PROBLEM, detail, fix, see)

    @classmethod
    def warning(cls, name: str, detail: str, fix: str) -> Finding:
        return cls(name, Status.WARNING, detail, fix)

    @classmethod
    def skipped(cls, name: str, detail: str) -> Finding:
        return cls(name, Status.SKIPPED, detail)

    def as_json(self) -> dict[str, Any]:
        """The stable JSON form: always these five keys."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix,
            "see": self.see.value if self.see is not None else None,
        }


class DoctorError(Exception):
    """Root of the doctor's errors: a check could not read what it checks; the message says what and why."""


class NotApplicable(DoctorError):
    """The check does not apply here (another backend, another family); the message says why."""


def unmet(step: str) -> NotApplicable:
    """The skip of a check that cannot run because ``step`` before it did not pass."""
    return NotApplicable(f"not checked: {step} did not pass")


def listing(items: Sequence[str], shown: int = 8) -> str:
    """``a, b, c and 5 more``: a 256-chip node must not make a finding 256 names long."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
