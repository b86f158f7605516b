"""A gRPC status message short enough to reach the client whole: at most 4 KiB on the wire.

grpcio clients drop trailers (``grpc-message`` among them) at random past 8 KiB and refuse them past
16 KiB: a longer message is cut to fit, and says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from grpclib.metadata import encode_grpc_message

MAX_STATUS_MESSAGE: Final = 4096  # bytes of the encoded grpc-message trailer


def capped(message: str) -> str:
    """``message`` unchanged when it fits, else its start and how long it was."""
    if len(encode_grpc_message(message)) <= MAX_STATUS_MESSAGE:
        return message
    marker = f" ... (cut to fit 4 KiB; {len(message)} characters in all)"
    budget = MAX_STATUS_MESSAGE - len(marker)
    encoded_sizes = itertools.accumulate(len(encode_grpc_message(character)) for character in message)
    fits = sum(1 for _ in itertools.takewhile(lambda size: size <= budget, encoded_sizes))
    return message[:fits] + marker


def listed(items: Sequence[str], shown: int = 10, longest: int = 100) -> str:
    """``a, b, c and 7 more``: at most ``shown`` items, each cut to ``longest`` characters ("none": empty)."""
    if not items:
        return "none"
    named = ", ".join(item if len(item) <= longest else item[:longest] + "..." for item in items[:shown])
    more = len(items) - shown
    return named + (f" and {more} more" if more > 0 else "")
