"""The platforms the image is built for, and which of them this machine runs natively.

The Dockerfile is for linux/amd64 and linux/arm64 alike (Atlas 200I A2 boards
and Kunpeng servers are arm64). Each platform carries the names the tools use
for it: Docker's architecture, what ``uname -m`` prints, Debian's cross
toolchain prefix and the ELF machine number (the binfmt_misc match).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass


class UnknownPlatform(ValueError):
    """A platform the check cannot build; the message names the allowed ones."""


class Unavailable(Exception):
    """This machine cannot check the platform; the message says why and what would help.

    A reason of the machine, not a defect of the image: the platform is skipped
    with it, as the whole check is where no container engine runs.
    """


@dataclass(frozen=True)
class Platform:
    name: str  # as engines spell it: linux/arm64
    machine: str  # as uname -m prints it: aarch64
    gnu_type: str  # Debian's cross toolchain: aarch64-linux-gnu-gcc
    elf_machine: int  # e_machine of its ELF files

    @property
    def arch(self) -> str:
        """Docker's and Debian's name of the architecture: arm64."""
        return self.name.partition("/")[2]

    @property
    def cross_compiler_package(self) -> str:
        """Debian's package of the C cross compiler for this platform: gcc-aarch64-linux-gnu."""
        return f"gcc-{self.gnu_type.replace('_', '-')}"


AMD64 = Platform("linux/amd64", "x86_64", "x86_64-linux-gnu", 0x3E)
ARM64 = Platform("linux/arm64", "aarch64", "aarch64-linux-gnu", 0xB7)
PLATFORMS = {item.name: item for item in (AMD64, ARM64)}
DEFAULT = ",".join(PLATFORMS)


def host(machine: str | None = None) -> Platform | None:
    """The platform this machine runs natively (``machine``: as uname -m prints it); None if neither."""
    machine = machine if machine is not None else platform.machine()
    return next((item for item in PLATFORMS.values() if item.machine == machine), None)


def parse(text: str) -> list[Platform]:
    """``linux/amd64,linux/arm64`` as platforms, in that order, each once."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in PLATFORMS]
    if unknown or not names:
        raise UnknownPlatform(
            f"cannot build for {', '.join(unknown) or 'no platform'}; allowed: {', '.join(PLATFORMS)}"
        )
    return [PLATFORMS[name] for name in names]


def native_first(requested: list[Platform], native: Platform | None) -> list[Platform]:
    """The native platform first: its check is the quickest and the CDI check runs on it."""
    return sorted(requested, key=lambda item: item != native)
