"""The committed cffi module is exactly what ``python -m backends.dcmi.build_ffi`` generates."""

from __future__ import annotations

from pathlib import Path

from backends.dcmi import build_ffi


def test_committed_module_matches_a_fresh_generation(tmp_path: Path) -> None:
    fresh = build_ffi.generate(tmp_path / "_dcmi_cffi.py")
    assert fresh.read_bytes() == build_ffi.OUTPUT.read_bytes(), (
        "backends/dcmi/_dcmi_cffi.py is stale: run `python -m backends.dcmi.build_ffi` (nox -s cffi)"
    )


def test_importing_the_binding_opens_no_library() -> None:
    from backends.dcmi import DcmiLibrary

    library = DcmiLibrary()
    assert library.description == "libdcmi.so (searched for at init)"
