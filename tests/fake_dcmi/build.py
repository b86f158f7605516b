"""Compile the fake libdcmi.so with the system C compiler, once per content.

The C source is compiled against the binding's declarations (``backends/dcmi/dcmi.h``,
as ``build_ffi.CDEF``), so the fake and the binding share one declaration of every prototype
and struct, and gcc checks the fake's definitions against it. Builds are cached
under tests/_build/ by a hash of everything that goes into them: a test session
compiles at most once, and not at all when nothing changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from backends.dcmi.build_ffi import CDEF

SOURCE = Path(__file__).with_name("fake_dcmi.c")
BUILD_ROOT = Path(__file__).resolve().parent.parent / "_build" / "fake_dcmi"
FLAGS = ("-shared", "-fPIC", "-O1", "-pthread", "-Wall", "-Wextra", "-Werror")


class FakeLibraryBuildFailed(Exception):
    """The C compiler rejected the fake library; the message carries its output."""


def _header() -> str:
    return f"#ifndef DCMI_CDEF_H\n#define DCMI_CDEF_H\n{CDEF}\n#endif\n"


def _version_script(hidden: Sequence[str]) -> str:
    # An exact name beats the wildcard: the hidden functions become local, as if the driver lacked them.
    return "{ global: *; local: " + " ".join(f"{name};" for name in hidden) + " };\n"


def build_fake_library(
    hidden: Sequence[str] = (), build_root: Path = BUILD_ROOT, compiler: str | None = None
) -> Path:
    """The path of a compiled fake ``libdcmi.so``; ``hidden`` functions are left out of its exports.

    The file is always called libdcmi.so, in a directory named by its hash, so
    the binding's search by file name finds it too. ``compiler`` (default: $CC,
    else cc) may be a cross compiler: the image check builds the library for
    each platform of the image (Debian's aarch64-linux-gnu-gcc for arm64).
    """
    compiler = compiler or os.environ.get("CC", "cc")
    recipe = "\0".join([SOURCE.read_text(encoding="utf-8"), _header(), compiler, *FLAGS, *sorted(hidden)])
    target = build_root / hashlib.sha256(recipe.encode()).hexdigest()[:16] / "libdcmi.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        work = Path(scratch)
        (work / "dcmi_cdef.h").write_text(_header(), encoding="utf-8")
        command = [compiler, *FLAGS, f"-I{work}", str(SOURCE), "-o", str(work / "libdcmi.so")]
        if hidden:
            (work / "exports.map").write_text(_version_script(hidden), encoding="utf-8")
            command.append(f"-Wl,--version-script={work / 'exports.map'}")
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise FakeLibraryBuildFailed(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
        os.replace(work / "libdcmi.so", target)  # atomic: a concurrent build never sees half a file
    return target
