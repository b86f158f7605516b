"""Watching threads that call a device library: is one inside a call."""

from __future__ import annotations

import sys
import threading

# Where a library's call runs: the Python fake's, and the binding's (its handle makes every C call).
_CALLS = (("_call", ["fake", "library.py"]), ("call", ["dcmi", "handle.py"]))


def inside_the_library(thread: threading.Thread) -> bool:
    """Whether ``thread`` is in a library's call: waiting out a hang, or in the C function doing so."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        code = frame.f_code
        if (code.co_name, code.co_filename.rsplit("/", 2)[-2:]) in _CALLS:
            return True
        frame = frame.f_back
    return False
