"""What the policy is told about a chip: a code raised, cleared, or reported once, and when."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from backends.library import FaultEvent

POLLED_SEVERITY = 0  # Huawei judges a code found by polling as if its severity were a hint


class Assertion(IntEnum):
    """DCMI's assertion values: what a fault event says happened."""

    RECOVERED = 0
    RAISED = 1
    ONE_OFF = 2


@dataclass(frozen=True)
class Observation:
    """One code on one chip changed, at ``at`` (Unix milliseconds)."""

    code: int
    assertion: Assertion
    at: int
    # The event's severity (0 hint, 1 minor, 2 major, 3 critical); None when the
    # source did not say, which judges an unlisted code as severe.
    severity: int | None = POLLED_SEVERITY
    polled: bool = False  # a poll saw it: a later poll that no longer lists it clears it

    @classmethod
    def of_event(cls, event: FaultEvent, at: int) -> Observation:
        """A fault event as an observation; any assertion DCMI adds later counts as raised."""
        assertion = _ASSERTIONS.get(event.assertion, Assertion.RAISED)
        return cls(event.code, assertion, at, event.severity)


_ASSERTIONS = {assertion.value: assertion for assertion in Assertion}
