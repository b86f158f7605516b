"""Where the idle plugin's resident memory goes before its own code runs: RSS after each import.

Run: ``python bench/import_rss.py``. One fresh interpreter per run, importing
in the order the daemon does (the event loop, pydantic and the settings, the
gRPC stack, then the plugin's own start-up modules), and printing the
resident set after each step from ``/proc/self/status``. It is the floor
under the "RSS, Kubernetes side off" figure of ``bench/idle.py``
(docs/performance.md "Idle cost").
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (what is imported, the modules); each step's RSS includes the steps before it.
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("asyncio (and with it ssl, OpenSSL)", ("asyncio",)),
    ("pydantic-core", ("pydantic_core",)),
    ("pydantic's BaseModel", ("pydantic.main",)),
    ("pydantic-settings", ("pydantic_settings",)),
    ("the plugin's Settings (its schema built)", ("ascend_plugin.settings",)),
    ("grpclib with h2", ("grpclib.server",)),
    ("betterproto2, anyio, cffi", ("betterproto2", "anyio", "cffi")),
    ("the plugin's start-up (ascend_plugin.app)", ("ascend_plugin.app",)),
)


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def main() -> None:
    figures = [(rss_mib(), "the interpreter")]
    for what, modules in STEPS:
        for module in modules:
            importlib.import_module(module)
        figures.append((rss_mib(), f"+ {what}"))
    from common import print_command  # only now: it imports modules of its own

    print_command()
    for mib, what in figures:
        print(f"{mib:6.1f} MiB  {what}")


if __name__ == "__main__":
    main()
