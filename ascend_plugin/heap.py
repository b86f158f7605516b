"""Settling the heap once start-up has built what lives as long as the process (docs/performance.md).

Frozen objects are never walked by a full collection (which held the loop 26-43 ms: bench/loop_stall.py).
"""

from __future__ import annotations

import ctypes
import gc


def settle() -> None:
    """Move every object alive now out of the collector's reach for good; hand free pages back."""
    gc.freeze()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except AttributeError:  # not glibc
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
