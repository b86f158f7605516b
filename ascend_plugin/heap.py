"""Settling the heap once start-up has built what lives as long as the process (docs/performance.md).

Frozen objects are never walked by a full collection (which held the loop 26-43 ms: bench/loop_stall.py);
the daemon settles after its parts are built and after the Kubernetes client is imported. ``malloc_trim``
gives back the free pages start-up left (about 1 MiB; musl has none). A process that runs many plugins,
like the tests, must not freeze.
"""

from __future__ import annotations

import ctypes
import gc


def settle() -> None:
    """Move every object alive now out of the collector's reach for good; hand free pages back."""
    gc.freeze()
    _trim_c_heap()


def _trim_c_heap() -> None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except AttributeError:  # not glibc
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
