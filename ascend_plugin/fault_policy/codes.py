"""Fault codes as Huawei writes them, and the codes its rules single out.

In Huawei's files a code is a hex string without ``0x``, of any case, 8 or 9
digits in practice (``80E01801``, ``110001024``, ``020001002``). Huawei keeps
the spelling it first read for each code and writes that back (upper-cased in
the device-info ConfigMap, lower-cased in ``UpgradeFaultReason``), so leading
zeros survive; a code it never read is written as plain hex without padding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

INT64_MAX = (1 << 63) - 1  # Go parses codes into an int64

# The parameter-plane ("network") codes: judged apart from the chip's own codes,
# for the chip's network health. The RoCE link down, and A5's UBoE codes.
LINK_DOWN = 0x81078603
UBOE_PORT_DOWN = 0x81078607
UBOE_SUB_HEALTH = 0x110000002
UBOE_PRE_SEPARATE = 0x110001024
NETWORK_CODES = frozenset({LINK_DOWN, UBOE_PORT_DOWN, UBOE_SUB_HEALTH, UBOE_PRE_SEPARATE})

# Codes with a role of their own in Huawei's handling.
CARD_DROP = 0x40F84E00  # raised while the chip's health query answers "not ready" (-8012)
RESET_FINISHED = 0x8C2FA009  # never stored: asks for a fresh read of the chip's codes
HBM_MULTI_BIT = 0x80E01801  # on-chip memory multi-bit error
AIC_BUS_ERROR = 0x80C98009  # AI Core bus error: also raised as a side effect of an HBM error
AIV_BUS_ERROR = 0x80CB8009  # AI Vector bus error: likewise

_HEX = re.compile(r"[0-9A-Fa-f]{1,16}")


def parse_code(text: str) -> int | None:
    """The code a hex string spells (``80E01801``), or None when it is not one.

    Only hex digits: no ``0x``, sign, space or underscore, and at most a 64-bit
    signed value, as Go's ``strconv.ParseInt(text, 16, 64)`` reads real codes.
    """
    if not _HEX.fullmatch(text):
        return None
    code = int(text, 16)
    return code if code <= INT64_MAX else None


def spell(code: int, spellings: Mapping[int, str]) -> str:
    """``code`` as the configuration first spelled it, lower-case; plain hex when it never did."""
    return spellings.get(code) or f"{code:x}"
