"""Writing a file so that a reader, or the next start after a crash, sees the old content or the new.

The CDI specs, the DRA driver's checkpoint and the hot-reset budget are read
by others (a container runtime) or by the plugin's next run: half a file would
be worse than none. ``durable`` also survives a power cut: the data and the
directory entry reach the disk before the call returns.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8) in one rename; OSError when it cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        if durable:
            file.flush()
            os.fsync(file.fileno())
    os.replace(temporary, path)
    if durable:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
