"""Watching threads that call a device library: is one inside a call."""

from __future__ import annotations

import sys
import threading


def inside_the_library(thread: threading.Thread) -> bool:
    """Whether ``thread`` is in a library's call: waiting out a hang, or in the C function doing so."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_call" and code.co_filename.endswith(("fake/library.py", "dcmi/library.py")):
            return True
        frame = frame.f_back
    return False
