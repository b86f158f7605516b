"""The glibc a library needs, against the glibc this process runs on.

A libdcmi.so built on a newer host fails to load here ("version `GLIBC_2.38' not found"); mixing the
host's C library into the image ends in SIGBUS. The requirement is read from the file, before loading.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ascend_plugin.doctor.elf import read_dynamic

Version = tuple[int, ...]

_GLIBC_VERSION: Final = re.compile(r"^GLIBC_(\d+(?:\.\d+)*)$")
# Parts of the C library itself: they come with the process's own glibc, and the
# binding never loads them from the driver's directory (backends.dcmi.loader).
_C_LIBRARY: Final = re.compile(r"^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[-\w]*)\.so")


@dataclass(frozen=True)
class GlibcNeed:
    """The newest glibc symbol version a library (or one it loads) needs."""

    version: Version
    needed_by: Path

    @property
    def text(self) -> str:
        return format_version(self.version)


def parse_version(text: str) -> Version:
    """ "2.34" -> (2, 34); raises ValueError for anything else."""
    return tuple(int(part) for part in text.split("."))


def format_version(version: Version) -> str:
    return ".".join(str(part) for part in version)


def running_glibc() -> Version | None:
    """This process's glibc version; None on another C library (musl) or when it cannot tell."""
    try:
        reported = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError):
        return None
    name, _, number = (reported or "").partition(" ")
    if name != "glibc":
        return None
    try:
        return parse_version(number)
    except ValueError:
        return None


def newest_glibc_needed(library: Path) -> GlibcNeed | None:
    """The newest ``GLIBC_x.y`` needed by ``library`` or by the libraries it loads from its own directory.

    The binding loads a library's missing dependencies from the library's
    directory (Atlas 200I A2 boards keep libascend_hal.so and friends beside
    libdcmi.so), so their requirements count too. Raises DoctorError or OSError
    for a file that cannot be read as an ELF object.
    """
    newest: GlibcNeed | None = None
    pending, seen = [library], {library.name}
    while pending:
        current = pending.pop()
        info = read_dynamic(current)
        for need in info.versions:
            if (match := _GLIBC_VERSION.match(need.version)) is not None:
                version = parse_version(match.group(1))
                if newest is None or version > newest.version:
                    newest = GlibcNeed(version, current)
        for name in info.needed:
            sibling = library.parent / name
            if name not in seen and not _C_LIBRARY.match(name) and sibling.is_file():
                seen.add(name)
                pending.append(sibling)
    return newest
