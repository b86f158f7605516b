"""Which platforms the image check builds, which it runs natively, and the fake library it builds for each.

The platforms are the ones the Dockerfile's own build command names; a platform
this machine cannot check (no emulator, no cross compiler) is a reason to skip
it, never a failure, and CI installs what each needs.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))

from image_check import fake_node, platforms  # noqa: E402

CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_check_covers_every_platform_the_dockerfile_is_built_for() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    (promised,) = re.findall(r"buildx build --platform (\S+)", dockerfile)
    assert set(platforms.parse(promised)) == set(platforms.parse(platforms.DEFAULT))


def test_platforms_are_read_in_order_each_once() -> None:
    assert platforms.parse(" linux/arm64,linux/amd64 ,linux/arm64") == [platforms.ARM64, platforms.AMD64]


@pytest.mark.parametrize("text", ["linux/riscv64", "", "linux/amd64,arm64"])
def test_a_platform_the_check_cannot_build_is_refused_with_the_allowed_ones(text: str) -> None:
    with pytest.raises(platforms.UnknownPlatform, match=r"allowed: linux/amd64, linux/arm64"):
        platforms.parse(text)


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", platforms.AMD64), ("aarch64", platforms.ARM64), ("riscv64", None)],
)
def test_the_native_platform_is_what_uname_names(machine: str, expected: platforms.Platform | None) -> None:
    assert platforms.host(machine) == expected


@pytest.mark.parametrize(
    ("native", "order"),
    [
        (platforms.AMD64, [platforms.AMD64, platforms.ARM64]),
        (platforms.ARM64, [platforms.ARM64, platforms.AMD64]),
        (None, [platforms.AMD64, platforms.ARM64]),
    ],
)
def test_the_native_platform_is_checked_first(
    native: platforms.Platform | None, order: list[platforms.Platform]
) -> None:
    assert platforms.native_first([platforms.AMD64, platforms.ARM64], native) == order


def test_ci_installs_what_a_foreign_platform_needs() -> None:
    """qemu through binfmt_misc for its image, Debian's cross compiler for its fake libdcmi.so."""
    for package in ("qemu-user-static", "binfmt-support"):
        assert f"missing+=({package})" in CI
    assert 'missing+=("gcc-${foreign//_/-}-linux-gnu")' in CI


def test_the_fake_library_is_built_for_this_machine() -> None:
    native = platforms.host()
    if native is None:
        pytest.skip(f"this machine is neither {' nor '.join(platforms.PLATFORMS)}")
    library, _ = fake_node.fake_library(native, native=True)
    assert fake_node.elf_machine(library) == native.elf_machine


def _foreign() -> platforms.Platform:
    return platforms.ARM64 if platforms.host() != platforms.ARM64 else platforms.AMD64


def test_the_fake_library_is_cross_compiled_for_the_foreign_platform() -> None:
    target = _foreign()
    if shutil.which(f"{target.gnu_type}-gcc") is None:
        pytest.skip(f"no {target.gnu_type}-gcc (CI installs {target.cross_compiler_package})")
    library, compiler = fake_node.fake_library(target, native=False)
    assert (compiler, fake_node.elf_machine(library)) == (f"{target.gnu_type}-gcc", target.elf_machine)


def test_a_compiler_for_another_machine_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """$CC pointing at a cross compiler must not pass a foreign library off as the native one."""
    target = _foreign()
    if shutil.which(f"{target.gnu_type}-gcc") is None:
        pytest.skip(f"no {target.gnu_type}-gcc (CI installs {target.cross_compiler_package})")
    monkeypatch.setenv("CC", f"{target.gnu_type}-gcc")
    native = platforms.AMD64 if target == platforms.ARM64 else platforms.ARM64
    with pytest.raises(fake_node.WrongArchitecture, match=rf"not {native.machine}"):
        fake_node.fake_library(native, native=True)


def test_a_missing_cross_compiler_skips_the_platform_with_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(platforms.Unavailable, match=r"apt-get install gcc-aarch64-linux-gnu"):
        fake_node.fake_library(platforms.ARM64, native=False)
