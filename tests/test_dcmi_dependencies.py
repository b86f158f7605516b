"""libdcmi.so's own dependencies are found beside it, as on Atlas 200I A2 boards (/usr/lib64)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from backends.dcmi._dcmi_cffi import ffi
from backends.dcmi.loader import open_library
from backends.errors import LibraryUnavailable


def _compile(directory: Path, name: str, source: str, *link: str) -> Path:
    (directory / f"{name}.c").write_text(source)
    target = directory / f"{name}.so"
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            f"-Wl,-soname,{name}.so",
            "-o",
            str(target),
            str(directory / f"{name}.c"),
            *link,
        ],
        check=True,
        capture_output=True,
    )
    return target


@pytest.fixture
def driver_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A libdcmi.so that needs libhal_<n>.so, which needs libcore_<n>.so, all in one directory.

    Names are unique per test: a library once loaded stays known to the
    process by its soname, and would satisfy the next test's dependency.
    """
    n = abs(hash(request.node.nodeid)) % 10**8
    _compile(tmp_path, f"libcore_{n}", "int hal_core(void) { return 0; }\n")
    _compile(
        tmp_path,
        f"libhal_{n}",
        "int hal_core(void);\nint hal_ping(void) { return hal_core(); }\n",
        f"-L{tmp_path}",
        f"-lcore_{n}",
    )
    _compile(
        tmp_path,
        "libdcmi",
        "int hal_ping(void);\nint dcmi_init(void) { return hal_ping(); }\n",
        f"-L{tmp_path}",
        f"-lhal_{n}",
    )
    return tmp_path


def test_the_dynamic_loader_alone_cannot_open_it(driver_dir: Path) -> None:
    with pytest.raises(OSError, match=r"libhal_\d+\.so: cannot open shared object file"):
        ffi.dlopen(str(driver_dir / "libdcmi.so"))


def test_dependencies_next_to_the_library_are_loaded_first(driver_dir: Path) -> None:
    library = open_library(driver_dir / "libdcmi.so", trusted_only=False)
    assert library.dcmi_init() == 0


def test_a_dependency_found_nowhere_is_named(driver_dir: Path) -> None:
    next(driver_dir.glob("libcore_*.so")).unlink()
    with pytest.raises(LibraryUnavailable, match=r"libcore_\d+\.so: cannot open shared object file"):
        open_library(driver_dir / "libdcmi.so", trusted_only=False)


def test_dependencies_pass_the_trust_check_too(driver_dir: Path) -> None:
    # tmp_path's parents include /tmp, which everyone may write: a trusted-only load must refuse.
    with pytest.raises(LibraryUnavailable, match="writable by"):
        open_library(driver_dir / "libdcmi.so", trusted_only=True)
