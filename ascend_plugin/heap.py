"""Settling the heap once start-up has built what lives as long as the process.

A full collection walks every object: over the modules, classes and tables
loaded by start-up it held the event loop for 26-43 ms (bench/loop_stall.py),
longer than any call may. Frozen objects are never walked again. The daemon
settles twice: once its parts are built, and once the Kubernetes client is
imported, which is as large again. (No collection first: it would cost that
pause once more, to save a few objects of import-time garbage.) A process that
runs many plugins, like the tests, must not freeze: each freeze would pin the
garbage of the plugins before it.

Start-up also leaves free pages inside the C allocator's heap (what imports
and schema building allocated and dropped); glibc keeps them resident until
asked. Asking once, here, gives back about 1 MiB of a daemon that idles on
every node (docs/performance.md); on a C library without ``malloc_trim``
(musl) there is nothing to ask.
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
