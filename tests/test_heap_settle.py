"""Settling the heap after start-up: the collector leaves what was built alone, and free pages go back.

In a child process, since a freeze lasts as long as the process. The C heap
is left with holes as start-up leaves it: blocks below glibc's mmap threshold,
every other one freed, so that the heap's top never becomes free and nothing
goes back by itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import gc, platform
    from ascend_plugin import heap

    def rss_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

    blocks = [bytearray(b"x" * 65536) for _ in range(400)]  # 25 MiB in 64 KiB blocks
    kept = blocks[1::2]
    del blocks
    before = rss_kib()
    heap.settle()
    print(gc.get_freeze_count() > 0, before - rss_kib(), platform.libc_ver()[0], len(kept))
    """
)


def test_settling_freezes_what_lives_and_gives_the_heaps_free_pages_back() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout
    frozen, given_back_kib, libc, _ = out.split()
    assert frozen == "True"
    if libc == "glibc":  # musl has no malloc_trim: nothing to give back, nothing asked
        assert int(given_back_kib) > 8 * 1024  # most of the 12.5 MiB of holes
