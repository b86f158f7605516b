"""The DCMI binding: Huawei's libdcmi.so through cffi in ABI mode (docs/dcmi.md).

Importing this package never touches the library.
"""

from backends.dcmi.library import DcmiLibrary

__all__ = ["DcmiLibrary"]
