"""Watching threads that call a device library: is one inside a call, or waiting out a hang of the C fake."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

CLOCK_NANOSLEEP = 230  # x86_64: how the C fake's usleep waits out a hang, 10 ms at a time
FAKE_EVENT_THREAD = "fake-dcmi-event"  # the C fake's own thread, which sleeps the same way


# Where a library's call runs: the Python fake's, and the binding's (its handle makes every C call);
# and the files whose methods make those calls.
_CALLS = (("_call", "fake/library.py"), ("call", "dcmi/handle.py"))
_LIBRARIES = ("fake/library.py", "fake/library_v2.py", "dcmi/library.py")


def inside_the_library(thread: threading.Thread, method: str | None = None) -> bool:
    """Whether ``thread`` is in a library's call (of ``method``): waiting out a hang, or in the C function."""
    frame = sys._current_frames().get(thread.ident or -1)
    inside = False
    while frame is not None:
        code = frame.f_code
        where = "/".join(code.co_filename.rsplit("/", 2)[-2:])
        inside = inside or (code.co_name, where) in _CALLS
        if inside and (method is None or (code.co_name == method and where in _LIBRARIES)):
            return True
        frame = frame.f_back
    return False


def hanging_in_the_c_fake(pid: int) -> bool:
    """Whether a thread of process ``pid`` waits out a hang of the C fake (asleep, not the fake's own thread).

    Read from /proc: a plugin's other threads wait in futex or epoll, never in
    clock_nanosleep.
    """
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            syscall = (task / "syscall").read_text().split()[0]
        except OSError:  # the thread ended meanwhile
            continue
        if name != FAKE_EVENT_THREAD and syscall == str(CLOCK_NANOSLEEP):
            return True
    return False
