"""A fault as the plugin reads it: a code, Huawei's level for it, and what was observed of it.

Levels, their order and special codes are Huawei's (docs/faults.md "How a chip's level is decided").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

from backends.library import FaultEvent


class FaultLevel(IntEnum):
    """Huawei's fault levels, ordered so that a larger value is more severe."""

    NormalNPU = 0
    NotHandleFault = 1
    SubHealthFault = 2
    RestartRequest = 3
    RestartBusiness = 4
    FreeRestartNPU = 5
    RestartNPU = 6
    PreSeparateNPU = 7
    SeparateNPU = 8
    ManuallySeparateNPU = 9

    @property
    def healthy(self) -> bool:
        """Whether a chip whose worst fault has this level may take new pods (whoever holds it)."""
        return self <= FaultLevel.SubHealthFault

    @property
    def one_off_hold(self) -> float:
        """Seconds a one-off event (assertion 2) keeps its code: it reports a moment, not a state."""
        if self.healthy:
            return 0.0
        return 300.0 if self >= FaultLevel.PreSeparateNPU else 60.0


def kubelet_healthy(level: FaultLevel, *, held: bool) -> bool:
    """The health the kubelet is told at ``level``: PreSeparateNPU is Healthy while held (Huawei's
    legacy grace-tolerance mode, never on in its current plugin, is not copied)."""
    return level.healthy or (level is FaultLevel.PreSeparateNPU and held)


def network_healthy(level: FaultLevel) -> bool:
    """Huawei's network health: Healthy only at NormalNPU or NotHandleFault."""
    return level <= FaultLevel.NotHandleFault


# -- codes -----------------------------------------------------------------------------------

INT64_MAX = (1 << 63) - 1  # Go parses codes into an int64

LINK_DOWN = 0x81078603  # the RoCE link down
# The parameter-plane ("network") codes, judged apart for the chip's network health: the RoCE link
# down, and A5's UBoE port down, sub-health and pre-separation.
NETWORK_CODES = frozenset({LINK_DOWN, 0x81078607, 0x110000002, 0x110001024})

CARD_DROP = 0x40F84E00  # raised while the chip's health query answers "not ready" (-8012)
RESET_FINISHED = 0x8C2FA009  # never stored: asks for a fresh read of the chip's codes
HBM_MULTI_BIT = 0x80E01801  # on-chip memory multi-bit error
AIC_BUS_ERROR = 0x80C98009  # AI Core bus error: also raised as a side effect of an HBM error
AIV_BUS_ERROR = 0x80CB8009  # AI Vector bus error: likewise

_HEX = re.compile(r"[0-9A-Fa-f]{1,16}")


def parse_code(text: str) -> int | None:
    """The code a hex string spells (``80E01801``), or None: hex digits only, as Go's ParseInt reads it."""
    if not _HEX.fullmatch(text):
        return None
    code = int(text, 16)
    return code if code <= INT64_MAX else None


def spell(code: int, spellings: Mapping[int, str]) -> str:
    """``code`` as Huawei's files first spelled it (leading zeros kept), lower-case; else plain hex."""
    return spellings.get(code) or f"{code:x}"


def format_code(code: int) -> str:
    """A fault code as the plugin logs it: at least eight upper-case hex digits."""
    return f"{code:08X}"


@dataclass(frozen=True)
class Fault:
    code: int
    level: FaultLevel

    def __str__(self) -> str:
        return f"{format_code(self.code)}:{self.level.name}"


# -- what the policy is told ------------------------------------------------------------------

POLLED_SEVERITY = 0  # Huawei judges a code found by polling as if its severity were a hint


class Assertion(IntEnum):
    """DCMI's assertion values: what a fault event says happened."""

    RECOVERED = 0
    RAISED = 1
    ONE_OFF = 2


@dataclass(frozen=True)
class Observation:
    """One code on one chip raised, cleared or reported once, at ``at`` (Unix milliseconds)."""

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


_ASSERTIONS = MappingProxyType({assertion.value: assertion for assertion in Assertion})
