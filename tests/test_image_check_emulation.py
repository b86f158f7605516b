"""Whether the image check can run another platform's image here: binfmt_misc handlers read and matched.

The entries are the kernel's own text (as /proc/sys/fs/binfmt_misc shows Debian's
qemu-user-static handler); the ELF headers they are matched against are checked
against a real executable, the interpreter running these tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))

from image_check import emulation, platforms  # noqa: E402

# /proc/sys/fs/binfmt_misc/qemu-aarch64 after `apt-get install qemu-user-static binfmt-support` (Debian 12).
DEBIAN_QEMU_AARCH64 = """\
enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: PF
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""
JAR = "enabled\ninterpreter /usr/bin/jexec\nflags: \nextension .jar\n"


def _binfmt(tmp_path: Path, entries: dict[str, str], status: str = "enabled") -> Path:
    directory = tmp_path / "binfmt_misc"
    directory.mkdir()
    (directory / "status").write_text(f"{status}\n")
    (directory / "register").write_text("")
    for name, text in entries.items():
        (directory / name).write_text(text)
    return directory


def test_debian_s_aarch64_handler_takes_aarch64_executables_and_nothing_else() -> None:
    handler = emulation.parse_handler("qemu-aarch64", DEBIAN_QEMU_AARCH64)
    assert handler is not None
    assert (handler.enabled, handler.interpreter, handler.flags) == (
        True, "/usr/libexec/qemu-binfmt/aarch64-binfmt-P", "PF",
    )  # fmt: skip
    assert handler.matches(emulation.elf_header(platforms.ARM64))
    assert not handler.matches(emulation.elf_header(platforms.AMD64))
    executable = bytearray(emulation.elf_header(platforms.ARM64))
    executable[16] = 2  # ET_EXEC: a non-PIE executable goes to the same handler (the mask allows both)
    assert handler.matches(bytes(executable))
    assert not handler.matches(emulation.elf_header(platforms.ARM64)[:10])  # shorter than the magic


def test_an_extension_handler_is_no_machine_handler() -> None:
    assert emulation.parse_handler("jar", JAR) is None


def test_the_header_of_this_machine_s_platform_is_that_of_a_real_executable() -> None:
    native = platforms.host()
    if native is None:
        pytest.skip(f"this machine is neither {' nor '.join(platforms.PLATFORMS)}")
    real = Path("/proc/self/exe").read_bytes()[:20]
    made = emulation.elf_header(native)
    # Class, byte order, version, and the machine; the type is ET_EXEC or ET_DYN (PIE).
    assert (made[:7], made[18:20]) == (real[:7], real[18:20])
    assert real[16] in (2, 3)


def test_the_handler_for_a_platform_is_an_enabled_one_that_matches(tmp_path: Path) -> None:
    disabled = DEBIAN_QEMU_AARCH64.replace("enabled", "disabled", 1)
    directory = _binfmt(tmp_path, {"jar": JAR, "qemu-aarch64": disabled})
    assert emulation.handler_for(platforms.ARM64, directory) is None
    (directory / "aarch64-by-another-name").write_text(DEBIAN_QEMU_AARCH64)
    found = emulation.handler_for(platforms.ARM64, directory)
    assert found is not None
    assert found.name == "aarch64-by-another-name"
    assert emulation.handler_for(platforms.AMD64, directory) is None


def test_a_registered_handler_is_used_as_it_is(tmp_path: Path) -> None:
    directory = _binfmt(tmp_path, {"qemu-aarch64": DEBIAN_QEMU_AARCH64})
    handler, done = emulation.ensure(platforms.ARM64, directory, debian_handlers=tmp_path / "none")
    assert (handler.name, done) == ("qemu-aarch64", [])


def test_a_handler_without_the_f_flag_cannot_serve_containers(tmp_path: Path) -> None:
    directory = _binfmt(tmp_path, {"qemu-aarch64": DEBIAN_QEMU_AARCH64.replace("flags: PF", "flags: P")})
    with pytest.raises(emulation.NoEmulation, match=r"lacks the F flag") as caught:
        emulation.ensure(platforms.ARM64, directory, debian_handlers=tmp_path / "none")
    assert isinstance(caught.value, platforms.Unavailable)  # a reason to skip the platform, not a failure


def test_binfmt_misc_switched_off_is_said(tmp_path: Path) -> None:
    directory = _binfmt(tmp_path, {"qemu-aarch64": DEBIAN_QEMU_AARCH64}, status="disabled")
    with pytest.raises(emulation.NoEmulation, match=r"binfmt_misc is disabled"):
        emulation.ensure(platforms.ARM64, directory, debian_handlers=tmp_path / "none")


def test_no_emulator_installed_names_the_packages(tmp_path: Path) -> None:
    directory = _binfmt(tmp_path, {"jar": JAR})
    with pytest.raises(emulation.NoEmulation) as caught:
        emulation.ensure(platforms.ARM64, directory, debian_handlers=tmp_path / "none")
    assert "aarch64" in str(caught.value)
    assert "apt-get install qemu-user-static binfmt-support" in str(caught.value)
