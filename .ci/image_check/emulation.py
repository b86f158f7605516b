"""Running another platform's binaries here: qemu's user-mode emulator through binfmt_misc.

The kernel hands an ELF file it cannot run to the binfmt_misc handler whose
magic matches the file's header. Debian's qemu-user-static registers one per
architecture (through binfmt-support's update-binfmts) with the F flag: the
kernel opens the emulator once, at registration, so it also runs binaries in
containers and chroots whose root has no emulator. That is what the foreign
image's build, its debootstrap base and its smoke test run on.

Making it work is tried, in order: mount binfmt_misc where it is not mounted,
then register Debian's handler where none matches. What cannot be done here
(no binfmt_misc in the kernel, no right to mount it, no emulator installed) is
:class:`NoEmulation`, whose message says why and what to install: the
platform is then skipped, as the whole check is without an engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from image_check.platforms import Platform, Unavailable

BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
DEBIAN_HANDLERS = Path("/usr/share/binfmts")  # where qemu-user-static leaves its handlers for update-binfmts
INSTALL = "apt-get install qemu-user-static binfmt-support"


class NoEmulation(Unavailable):
    """This machine cannot run the platform's binaries; the message says why and what would help."""


@dataclass(frozen=True)
class Handler:
    """One registered binfmt_misc entry (the magic kind; extension entries are left out)."""

    name: str
    enabled: bool
    interpreter: str
    flags: str
    offset: int
    magic: bytes
    mask: bytes

    def matches(self, header: bytes) -> bool:
        """Would the kernel hand a file starting with ``header`` to this handler?"""
        window = header[self.offset : self.offset + len(self.magic)]
        if len(window) < len(self.magic):
            return False
        return all(a & m == b & m for a, b, m in zip(window, self.magic, self.mask, strict=True))

    def describe(self) -> str:
        return f"binfmt_misc handler {self.name}: {self.interpreter} (flags {self.flags or '-'})"


def parse_handler(name: str, text: str) -> Handler | None:
    """An entry file of binfmt_misc as a Handler; None for an extension entry."""
    fields: dict[str, str] = {}
    enabled = False
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in {"enabled", "disabled"}:
            enabled = key == "enabled"
        else:
            fields[key.rstrip(":")] = value.strip()
    if "magic" not in fields:
        return None
    magic = bytes.fromhex(fields["magic"])
    mask = bytes.fromhex(fields["mask"]) if "mask" in fields else b"\xff" * len(magic)
    return Handler(
        name, enabled, fields.get("interpreter", ""), fields.get("flags", ""),
        int(fields.get("offset", "0")), magic, mask,
    )  # fmt: skip


def elf_header(target: Platform) -> bytes:
    """The first 20 bytes of a 64-bit little-endian ELF executable (position-independent) for ``target``."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, ELFDATA2LSB, EV_CURRENT, SYSV
    return ident + (3).to_bytes(2, "little") + target.elf_machine.to_bytes(2, "little")  # ET_DYN


def handlers(directory: Path = BINFMT_MISC) -> list[Handler]:
    found = []
    for entry in sorted(directory.iterdir()):
        if entry.name in {"register", "status"}:
            continue
        try:
            handler = parse_handler(entry.name, entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # removed meanwhile, or an entry this parser does not know
        if handler is not None:
            found.append(handler)
    return found


def handler_for(target: Platform, directory: Path = BINFMT_MISC) -> Handler | None:
    """The enabled handler the kernel would run ``target``'s executables with, if any."""
    header = elf_header(target)
    return next((h for h in handlers(directory) if h.enabled and h.matches(header)), None)


def _mounted(directory: Path) -> bool:
    return (directory / "status").exists()


def _mount(directory: Path) -> None:
    if os.geteuid() != 0:
        raise NoEmulation(f"binfmt_misc is not mounted on {directory}, and mounting it needs root")
    mounted = subprocess.run(
        ["mount", "-t", "binfmt_misc", "binfmt_misc", str(directory)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        raise NoEmulation(
            f"binfmt_misc is not mounted on {directory} and cannot be mounted here "
            f"({mounted.stderr.strip() or f'mount exited with {mounted.returncode}'}): the kernel or the "
            "container this runs in does not allow it"
        )


def _register(target: Platform, directory: Path, debian_handlers: Path) -> None:
    """Enable Debian's qemu handler for ``target`` (update-binfmts mounts binfmt_misc itself if needed)."""
    name = f"qemu-{target.machine}"
    if not (debian_handlers / name).is_file() or shutil.which("update-binfmts") is None:
        raise NoEmulation(f"no binfmt_misc handler runs {target.machine} binaries here ({INSTALL})")
    if os.geteuid() != 0:
        raise NoEmulation(
            f"no binfmt_misc handler runs {target.machine} binaries, and registering one needs root"
        )
    enabled = subprocess.run(
        ["update-binfmts", "--enable", name], capture_output=True, text=True, timeout=60, check=False
    )
    if enabled.returncode != 0 and handler_for(target, directory) is None:
        raise NoEmulation(f"`update-binfmts --enable {name}` failed: {enabled.stderr.strip()}")


def ensure(
    target: Platform, directory: Path = BINFMT_MISC, debian_handlers: Path = DEBIAN_HANDLERS
) -> tuple[Handler, list[str]]:
    """The handler that runs ``target``'s binaries, set up if need be, and what was done for it."""
    done = []
    if not _mounted(directory):
        _mount(directory)
        done.append(f"mounted binfmt_misc on {directory}")
    if (directory / "status").read_text(encoding="utf-8").strip() != "enabled":
        raise NoEmulation(f"binfmt_misc is disabled on this machine ({directory / 'status'})")
    handler = handler_for(target, directory)
    if handler is None:
        _register(target, directory, debian_handlers)
        handler = handler_for(target, directory)
        if handler is None:
            raise NoEmulation(
                f"qemu-{target.machine} was registered, yet no handler matches {target.machine} binaries"
            )
        done.append(f"registered {handler.name}")
    if "F" not in handler.flags:
        raise NoEmulation(
            f"{handler.describe()} lacks the F flag, so containers, whose root has no {handler.interpreter}, "
            f"cannot use it; Debian's qemu-user-static registers with F ({INSTALL})"
        )
    return handler, done
