"""doctor, the library: found as the binding finds it, trusted, glibc new enough, loadable."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DoctorRoot

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.doctor import library
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.elf import read_dynamic
from ascend_plugin.doctor.findings import DoctorError, Guide, Status
from ascend_plugin.doctor.glibc import newest_glibc_needed, parse_version, running_glibc
from ascend_plugin.settings import Settings

pytestmark = pytest.mark.anyio

_GLIBC_NAME = re.compile(rb"GLIBC_[0-9.]+\0")


def _craft_newer_glibc(path: Path) -> str:
    """Rewrite the first GLIBC_x.y the file names into one with every digit 9; return that version.

    The string keeps its length, so every offset in the file stays valid: to the
    reader (and to the dynamic loader) the library now needs a glibc from the future.
    """
    data = path.read_bytes()
    found = _GLIBC_NAME.search(data)
    assert found is not None, f"{path} names no GLIBC version"
    crafted = re.sub(rb"[0-9]", b"9", found.group())
    path.write_bytes(data[: found.start()] + crafted + data[found.end() :])
    return crafted[len(b"GLIBC_") : -1].decode()


def _compile(directory: Path, name: str, source: str, *libraries: str) -> Path:
    """A shared library lib<name>.so built here (with that soname, like a driver library), linked
    against lib<library>.so in the same directory."""
    directory.mkdir(parents=True, exist_ok=True)
    source_file = directory / f"{name}.c"
    source_file.write_text(source, encoding="utf-8")
    target = directory / f"lib{name}.so"
    links = [f"-l{library}" for library in libraries]
    command = [os.environ.get("CC", "cc"), "-shared", "-fPIC", f"-Wl,-soname,{target.name}"]
    command += ["-o", str(target), str(source_file)]
    subprocess.run([*command, f"-L{directory}", *links], check=True, capture_output=True)
    return target


def _dependent_pair(directory: Path, dependency_name: str) -> tuple[Path, Path]:
    """libmain.so, which needs lib<dependency_name>.so beside it (as libdcmi.so needs libascend_hal.so
    on a 310B board).

    Each test names its dependency differently: the binding keeps the dependencies
    it loads for the life of the process, and the dynamic loader would hand a later
    test the one already loaded under the same soname.
    """
    dependency = _compile(
        directory, dependency_name, '#include <stdio.h>\nint dep(void) { return puts("x"); }\n'
    )
    main = _compile(directory, "main", "int dep(void);\nint entry(void) { return dep(); }\n", dependency_name)
    return main, dependency


# -- the ELF reader and the glibc comparison -----------------------------------------------


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf to compare with")
def test_the_reader_sees_what_readelf_sees(fake_dcmi_library: Path) -> None:
    info = read_dynamic(fake_dcmi_library)
    listing = subprocess.run(
        ["readelf", "--dynamic", "--version-info", "--wide", str(fake_dcmi_library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert set(info.needed) == set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", listing))
    assert {need.version for need in info.versions} == set(re.findall(r"Name: (\S+)\s+Flags", listing))
    assert {need.library for need in info.versions} == set(re.findall(r"File: (\S+)\s+Cnt", listing))


def test_versions_compare_as_numbers() -> None:
    assert parse_version("2.2.5") < parse_version("2.17") < parse_version("2.34") < parse_version("2.36")
    assert parse_version("2.34") < parse_version("99.0")


def test_this_process_glibc_is_read_from_the_c_library() -> None:
    name, version = platform.libc_ver()
    if name != "glibc":
        pytest.skip("not a glibc system")
    assert running_glibc() == parse_version(version)


def test_a_crafted_requirement_is_the_newest(tmp_path: Path, fake_dcmi_library: Path) -> None:
    crafted = tmp_path / "libdcmi.so"
    shutil.copyfile(fake_dcmi_library, crafted)
    version = _craft_newer_glibc(crafted)
    need = newest_glibc_needed(crafted)
    assert need is not None
    assert need.text == version
    assert need.needed_by == crafted


def test_libraries_loaded_from_beside_the_library_count_but_the_c_library_does_not(tmp_path: Path) -> None:
    main, dependency = _dependent_pair(tmp_path, "dep")
    assert read_dynamic(main).needed[0] == "libdep.so"
    own = newest_glibc_needed(main)

    # A libc.so.6 beside it (310B boards keep the host's there) is never loaded from there.
    shutil.copyfile(dependency, tmp_path / "libc.so.6")
    _craft_newer_glibc(tmp_path / "libc.so.6")
    assert newest_glibc_needed(main) == own

    version = _craft_newer_glibc(dependency)
    need = newest_glibc_needed(main)
    assert need is not None
    assert (need.text, need.needed_by) == (version, dependency)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"#!/bin/sh\n", "not an ELF file"),
        (b"\x7fELF\x01\x01\x01" + bytes(60), "not a 64-bit little-endian ELF object"),
        (b"\x7fELF\x02\x01\x01" + bytes(20), "truncated or inconsistent"),
    ],
)
def test_what_is_not_a_readable_elf_object_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "libdcmi.so"
    path.write_bytes(content)
    with pytest.raises(DoctorError, match=message):
        read_dynamic(path)


async def test_a_library_needing_a_newer_glibc_is_named_with_the_fix(
    doctor_c_root: DoctorRoot,
) -> None:
    version = _craft_newer_glibc(doctor_c_root.host(DoctorRoot.LIBRARY))
    found = await doctor_c_root.run()
    glibc = found["dcmi-library-glibc"]
    assert glibc.status is Status.PROBLEM
    assert glibc.see is Guide.GLIBC
    assert f"needs glibc {version}" in glibc.detail
    assert glibc.fix is not None
    assert "hostLoader.enabled=true" in glibc.fix
    assert "SIGBUS" in glibc.fix
    # The loader refuses it in its own words, and the doctor points back at the cause.
    loads = found["dcmi-library-loads"]
    assert (loads.status, loads.see) == (Status.PROBLEM, Guide.GLIBC)
    assert f"GLIBC_{version}" in loads.detail
    assert found["dcmi-init"].status is Status.SKIPPED


async def test_a_file_that_is_not_a_library_is_a_glibc_problem(doctor_c_root: DoctorRoot) -> None:
    doctor_c_root.add_files(DoctorRoot.LIBRARY, content=b"not a library")
    found = await doctor_c_root.run()
    assert found["dcmi-library-glibc"].status is Status.PROBLEM
    assert "not an ELF file" in found["dcmi-library-glibc"].detail


# -- found, trusted, loads ----------------------------------------------------------------


async def test_the_configured_library_is_taken_under_the_root(doctor_c_root: DoctorRoot) -> None:
    found = (await doctor_c_root.run())["dcmi-library"]
    assert found.status is Status.OK
    assert found.detail == f"{doctor_c_root.host(DoctorRoot.LIBRARY)} (from the dcmi_library setting)"


async def test_without_a_setting_the_binding_search_runs_under_the_root(doctor_c_root: DoctorRoot) -> None:
    # The known install path /usr/lib64/libdcmi.so ...
    found = (await doctor_c_root.run(dcmi_library=None))["dcmi-library"]
    assert found.status is Status.OK
    assert found.detail.startswith(str(doctor_c_root.host(DoctorRoot.LIBRARY)))
    # ... loses to an LD_LIBRARY_PATH entry holding one.
    elsewhere = doctor_c_root.host("/opt/driver/lib/libdcmi.so")
    doctor_c_root.add_files("/opt/driver/lib/libdcmi.so", content=b"")
    found = (await doctor_c_root.run({"LD_LIBRARY_PATH": "/opt/driver/lib"}, dcmi_library=None))[
        "dcmi-library"
    ]
    assert found.detail == f"{elsewhere} (from the binding's search: LD_LIBRARY_PATH, then the install paths)"


async def test_a_missing_library_names_where_it_looked_and_the_setting(doctor_c_root: DoctorRoot) -> None:
    doctor_c_root.remove(DoctorRoot.LIBRARY)
    found = await doctor_c_root.run(dcmi_library=None)
    missing = found["dcmi-library"]
    assert missing.status is Status.PROBLEM
    assert str(doctor_c_root.host("/usr/local/Ascend/driver/lib64/driver/libdcmi.so")) in missing.detail
    assert missing.fix is not None
    assert "Helm settings.dcmiLibrary" in missing.fix
    assert found["dcmi-library-trust"].detail == "not checked: dcmi-library did not pass"


async def test_the_fake_backend_has_no_library_to_check(doctor_py_root: DoctorRoot) -> None:
    found = await doctor_py_root.run()
    for name in ("dcmi-library", "dcmi-library-trust", "dcmi-library-glibc", "dcmi-library-loads"):
        assert found[name].status is Status.SKIPPED
        assert "fake backend" in found[name].detail


async def test_an_untrusted_library_is_refused_and_not_loaded(doctor_c_root: DoctorRoot) -> None:
    found = await doctor_c_root.run(dcmi_allow_untrusted_library=False)
    trust = found["dcmi-library-trust"]
    assert trust.status is Status.PROBLEM
    assert "directory /tmp is writable" in trust.detail  # the temporary root lives in /tmp
    assert trust.fix is not None
    assert "--dcmi-allow-untrusted-library" in trust.fix
    assert found["dcmi-library-loads"].detail == "not checked: dcmi-library-trust did not pass"


async def test_allowing_untrusted_libraries_says_the_check_is_off(doctor_c_root: DoctorRoot) -> None:
    trust = (await doctor_c_root.run())["dcmi-library-trust"]
    assert trust.status is Status.SKIPPED
    assert trust.detail.startswith("not enforced: dcmi_allow_untrusted_library is set")


async def test_a_root_owned_system_file_is_trusted() -> None:
    settings = Settings(backend="dcmi", dcmi_library=Path("/bin/sh"), node_name=None)
    context = Context(settings, Path("/"), {}, ChipCalls(1.0))
    context.library_path = Path("/bin/sh")
    try:
        [trusted] = await library.library_trusted.run(context)
    finally:
        await context.close()
    assert trusted.status is Status.OK
    assert context.library_may_load


async def test_a_dependency_beside_the_library_is_loaded_from_there(doctor_c_root: DoctorRoot) -> None:
    main, _ = _dependent_pair(doctor_c_root.host("/usr/lib64"), "beside")
    found = await doctor_c_root.run(dcmi_library=Path("/usr/lib64") / main.name)
    assert found["dcmi-library-loads"].status is Status.OK


async def test_a_missing_dependency_is_named_with_the_way_to_find_it(doctor_c_root: DoctorRoot) -> None:
    main, dependency = _dependent_pair(doctor_c_root.host("/usr/lib64"), "gone")
    dependency.unlink()
    loads = (await doctor_c_root.run(dcmi_library=Path("/usr/lib64") / main.name))["dcmi-library-loads"]
    assert loads.status is Status.PROBLEM
    assert "libgone.so: cannot open shared object file" in loads.detail
    assert loads.fix is not None
    assert "ldd" in loads.fix
