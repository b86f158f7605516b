"""Quantities as the API server writes them back, so that a published slice compares equal to the stored one.

The server stores a quantity in its canonical form: 65536 MiB sent as
``65536Mi`` comes back as ``64Gi``. A driver that published the other spelling
would find its slice different from what it sent at every comparison and
rewrite it forever.
"""

from __future__ import annotations

from ascend_plugin.kubeapi.client import JsonObject
from backends.vnpu_split import MEMORY

_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_quantity(mib: int) -> str:
    """``mib`` MiB as the API server writes it back: with the largest binary suffix that keeps it whole."""
    value, suffix = mib * 1024 * 1024, 0
    while value and value % 1024 == 0 and suffix < len(_BINARY_SUFFIXES) - 1:
        value //= 1024
        suffix += 1
    return f"{value}{_BINARY_SUFFIXES[suffix]}"


def counter_value(resource: str, amount: int) -> JsonObject:
    """A counter of a chip's resource: memory (MiB) as a binary quantity, the rest as plain counts."""
    return {"value": binary_quantity(amount) if resource == MEMORY else str(amount)}
