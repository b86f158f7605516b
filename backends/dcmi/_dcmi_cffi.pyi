# Type stub of the generated module: cffi ships no type information, so the
# binding treats cdata as Any and converts every value it reads explicitly.
from typing import Any

ffi: Any
