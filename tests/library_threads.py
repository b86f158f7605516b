"""Watching threads that call a device library: is one inside a call, and waiting for a condition."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

WAIT = 30.0  # generous: a healthy call answers within milliseconds


def inside_the_library(thread: threading.Thread) -> bool:
    """Whether ``thread`` is in a library's call: waiting out a hang, or in the C function doing so."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_call" and code.co_filename.endswith(("fake/library.py", "dcmi/library.py")):
            return True
        frame = frame.f_back
    return False


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)
