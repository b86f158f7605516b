"""Keeping the cyclic garbage collector off what start-up built: it lives as long as the process.

A full collection walks every object: over the modules, classes and tables
loaded by start-up it held the event loop for 26-43 ms (bench/loop_stall.py),
longer than any call may. Frozen objects are never walked again. The daemon
freezes twice: once its parts are built, and once the Kubernetes client is
imported, which is as large again. (No collection first: it would cost that
pause once more, to save a few objects of import-time garbage.) A process that
runs many plugins, like the tests, must not freeze: each freeze would pin the
garbage of the plugins before it.
"""

from __future__ import annotations

import gc


def freeze() -> None:
    """Move every object alive now out of the collector's reach for good."""
    gc.freeze()
