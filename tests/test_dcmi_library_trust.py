"""The binding refuses a libdcmi.so that anyone but root could have replaced, unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer

from backends.dcmi import DcmiLibrary
from backends.dcmi.loader import UntrustedLibrary, check_trusted
from backends.fake import FakeScenario

NOBODY = 65534
# The refused cases are files this test creates, which must otherwise pass: owned by root.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs to create root-owned files")


def _library(directory: Path, mode: int = 0o644) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "libdcmi.so"
    path.write_bytes(b"")
    path.chmod(mode)
    return path


def test_a_system_file_in_root_owned_directories_is_trusted() -> None:
    check_trusted(Path("/bin/sh"))  # through the /bin -> usr/bin and sh -> dash links on merged-usr systems


@needs_root
def test_a_library_writable_by_others_is_refused(tmp_path: Path) -> None:
    library = _library(tmp_path / "lib", 0o646)
    with pytest.raises(UntrustedLibrary) as raised:
        check_trusted(library)
    assert raised.value.problem == f"file {library} is writable by others (mode 0646)"
    assert "--dcmi-allow-untrusted-library" in str(raised.value)


@needs_root
def test_a_directory_writable_by_the_group_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    library = _library(directory)
    directory.chmod(0o775)
    with pytest.raises(UntrustedLibrary, match=f"directory {directory} is writable by group"):
        check_trusted(library)


@needs_root
def test_a_library_not_owned_by_root_is_refused(tmp_path: Path) -> None:
    library = _library(tmp_path / "lib")
    os.chown(library, NOBODY, NOBODY)
    with pytest.raises(UntrustedLibrary, match=f"file {library} is owned by uid {NOBODY}, not root"):
        check_trusted(library)


@needs_root
def test_a_link_into_an_open_directory_is_refused(tmp_path: Path) -> None:
    target = _library(tmp_path / "open")
    (tmp_path / "open").chmod(0o777)
    link = tmp_path / "tidy" / "libdcmi.so"
    link.parent.mkdir()
    link.symlink_to(target)
    with pytest.raises(
        UntrustedLibrary, match=f"directory {tmp_path / 'open'} is writable by group and others"
    ):
        check_trusted(link)


@needs_root
def test_the_binding_refuses_an_untrusted_library_unless_allowed(c_fake: CFakePlayer) -> None:
    c_fake.update(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    c_fake.library_path.parent.chmod(0o777)
    strict = DcmiLibrary(c_fake.library_path)
    with pytest.raises(UntrustedLibrary, match=f"refusing to load {c_fake.library_path}"):
        strict.init()

    relaxed = DcmiLibrary(c_fake.library_path, allow_untrusted=True)
    relaxed.init()
    try:
        assert relaxed.card_list() == [0]
    finally:
        relaxed.close()
