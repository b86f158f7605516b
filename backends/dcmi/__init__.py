"""The DCMI binding: Huawei's libdcmi.so through cffi in ABI mode.

``build_ffi`` declares the C interface and generates ``_dcmi_cffi`` (committed);
``loader`` finds, vets and opens the library; ``decode`` turns its structs into
plain values; ``library`` holds :class:`DcmiLibrary`, the DeviceLibrary the plugin
uses on real chips. Importing this package never touches the library.
"""

from backends.dcmi.library import DcmiLibrary

__all__ = ["DcmiLibrary"]
