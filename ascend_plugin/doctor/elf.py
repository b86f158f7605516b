"""A small reader of an ELF shared object's dynamic section: the libraries and symbol versions it needs.

Read through the program headers as the dynamic loader does (stripped libraries too), 64-bit
little-endian only: Ascend drivers exist for aarch64 and x86_64 alone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ascend_plugin.doctor.findings import DoctorError

_IDENT: Final = b"\x7fELF\x02\x01"  # magic, 64-bit class, little-endian
_HEADER: Final = struct.Struct("<QQIHHH")  # e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum
_HEADER_AT: Final = 32
_PROGRAM: Final = struct.Struct("<IIQQQQQQ")  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, ...
_DYNAMIC: Final = struct.Struct("<qQ")  # d_tag, d_val
_VERNEED: Final = struct.Struct("<HHIII")  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
_VERNAUX: Final = struct.Struct("<IHHII")  # vna_hash, vna_flags, vna_other, vna_name, vna_next

_PT_LOAD: Final = 1
_PT_DYNAMIC: Final = 2
_DT_NULL: Final = 0
_DT_NEEDED: Final = 1
_DT_STRTAB: Final = 5
_DT_STRSZ: Final = 10
_DT_VERNEED: Final = 0x6FFFFFFE
_DT_VERNEEDNUM: Final = 0x6FFFFFFF


@dataclass(frozen=True)
class VersionNeed:
    """One symbol version the object needs from one library, e.g. (libc.so.6, GLIBC_2.34)."""

    library: str
    version: str


@dataclass(frozen=True)
class DynamicInfo:
    """What the dynamic loader must satisfy to load the object."""

    needed: tuple[str, ...]
    versions: tuple[VersionNeed, ...]


def read_dynamic(path: Path) -> DynamicInfo:
    """The needed libraries and symbol versions of the ELF object at ``path``.

    Raises :class:`DoctorError` for anything that is not a dynamically linked
    64-bit little-endian ELF object, and OSError when the file cannot be read.
    """
    data = path.read_bytes()
    try:
        return _Reader(data).dynamic_info()
    except (struct.error, ValueError) as error:  # reads past the end, unterminated or bad strings
        raise DoctorError(f"{path}: truncated or inconsistent ELF data ({error})") from error
    except DoctorError as error:
        raise DoctorError(f"{path}: {error}") from error


class _Reader:
    """One object's bytes, with its loaded segments mapped back to file offsets."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != _IDENT[:4]:
            raise DoctorError("not an ELF file")
        if data[: len(_IDENT)] != _IDENT:
            raise DoctorError("not a 64-bit little-endian ELF object (aarch64, x86_64)")
        self.data = data
        self.loads: list[tuple[int, int, int]] = []  # (vaddr, filesz, offset)
        self.dynamic_at: int | None = None
        phoff, _, _, _, phentsize, phnum = _HEADER.unpack_from(data, _HEADER_AT)
        for index in range(phnum):
            p_type, _, offset, vaddr, _, filesz, _, _ = _PROGRAM.unpack_from(data, phoff + index * phentsize)
            if p_type == _PT_LOAD:
                self.loads.append((vaddr, filesz, offset))
            elif p_type == _PT_DYNAMIC:
                self.dynamic_at = offset

    def _file_offset(self, address: int) -> int:
        for vaddr, filesz, offset in self.loads:
            if vaddr <= address < vaddr + filesz:
                return offset + address - vaddr
        raise DoctorError(f"address {address:#x} lies in no loaded segment")

    def _entries(self, offset: int) -> dict[int, list[int]]:
        entries: dict[int, list[int]] = {}
        while True:
            tag, value = _DYNAMIC.unpack_from(self.data, offset)
            if tag == _DT_NULL:
                return entries
            entries.setdefault(tag, []).append(value)
            offset += _DYNAMIC.size

    def dynamic_info(self) -> DynamicInfo:
        if self.dynamic_at is None:
            raise DoctorError("no dynamic segment (a static executable, or not a shared object)")
        entries = self._entries(self.dynamic_at)
        if _DT_STRTAB not in entries:
            raise DoctorError("the dynamic section has no string table")
        strings = self._file_offset(entries[_DT_STRTAB][0])
        strings_end = strings + entries.get(_DT_STRSZ, [len(self.data) - strings])[0]

        def text(index: int) -> str:
            start = strings + index
            return self.data[start : self.data.index(b"\0", start, strings_end)].decode()

        needed = tuple(text(index) for index in entries.get(_DT_NEEDED, []))
        versions: list[VersionNeed] = []
        if _DT_VERNEED in entries:
            at = self._file_offset(entries[_DT_VERNEED][0])
            for _ in range(entries.get(_DT_VERNEEDNUM, [0])[0]):
                _, count, file_name, aux, following = _VERNEED.unpack_from(self.data, at)
                aux_at = at + aux
                for _ in range(count):
                    _, _, _, name, aux_next = _VERNAUX.unpack_from(self.data, aux_at)
                    versions.append(VersionNeed(text(file_name), text(name)))
                    aux_at += aux_next
                at += following
        return DynamicInfo(needed, tuple(versions))
