"""Where the binding looks for libdcmi.so: the setting, else LD_LIBRARY_PATH, else Huawei's install paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer

from backends.dcmi import DcmiLibrary
from backends.dcmi.loader import KNOWN_PATHS, LibraryNotFound, locate
from backends.fake import FakeScenario


def _library_in(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "libdcmi.so"
    path.write_bytes(b"")
    return path


def test_the_known_install_paths_in_order() -> None:
    assert [str(path) for path in KNOWN_PATHS] == [
        "/usr/local/Ascend/driver/lib64/driver/libdcmi.so",  # servers and cards
        "/usr/local/dcmi/libdcmi.so",  # the DCMI package
        "/usr/lib64/libdcmi.so",  # Atlas 200I A2 / 500 A2 boards
    ]


def test_a_configured_path_wins_and_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configured = _library_in(tmp_path / "mine")
    elsewhere = _library_in(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    found = locate(Path("mine/libdcmi.so"), {"LD_LIBRARY_PATH": str(elsewhere.parent)}, known=(elsewhere,))
    assert found == configured
    assert found.is_absolute()


def test_a_configured_path_that_is_missing_is_not_searched_around(tmp_path: Path) -> None:
    elsewhere = _library_in(tmp_path / "elsewhere")
    with pytest.raises(
        LibraryNotFound, match=r"configured DCMI library .*/nowhere/libdcmi.so does not exist"
    ):
        locate(
            tmp_path / "nowhere" / "libdcmi.so",
            {"LD_LIBRARY_PATH": str(elsewhere.parent)},
            known=(elsewhere,),
        )


def test_the_first_ld_library_path_entry_holding_the_library(tmp_path: Path) -> None:
    second = _library_in(tmp_path / "second")
    _library_in(tmp_path / "third")
    known = _library_in(tmp_path / "known")
    search = f":{tmp_path / 'first'}:{second.parent}:{tmp_path / 'third'}"
    assert locate(None, {"LD_LIBRARY_PATH": search}, known=(known,)) == second


def test_the_install_paths_after_ld_library_path(tmp_path: Path) -> None:
    known = _library_in(tmp_path / "usr" / "lib64")
    environ = {"LD_LIBRARY_PATH": str(tmp_path / "empty")}
    assert locate(None, environ, known=(tmp_path / "absent" / "libdcmi.so", known)) == known


def test_not_found_says_everywhere_it_looked(tmp_path: Path) -> None:
    with pytest.raises(LibraryNotFound) as raised:
        locate(None, {"LD_LIBRARY_PATH": f"{tmp_path}/a:{tmp_path}/b"})
    message = str(raised.value)
    for place in [
        f"{tmp_path}/a/libdcmi.so",
        f"{tmp_path}/b/libdcmi.so",
        *(str(path) for path in KNOWN_PATHS),
    ]:
        assert place in message
    assert "--dcmi-library" in message


def test_the_binding_finds_the_library_on_ld_library_path(
    c_fake: CFakePlayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    c_fake.update(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    monkeypatch.setenv("LD_LIBRARY_PATH", os.pathsep.join(["/nonexistent", str(c_fake.library_path.parent)]))
    library = DcmiLibrary(allow_untrusted=True)
    library.init()
    try:
        assert library.description == str(c_fake.library_path)
        assert library.card_list() == [0]
    finally:
        library.close()
