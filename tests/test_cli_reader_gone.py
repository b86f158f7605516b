"""A reader that stops reading (``simulate | head``) ends the command quietly, as ``yes | head`` does."""

from __future__ import annotations

import os
import subprocess
import sys

from ascend_plugin.cli import EXIT_READER_GONE


def test_simulate_piped_into_head_ends_without_a_traceback() -> None:
    reading, writing = os.pipe()
    with subprocess.Popen(
        [sys.executable, "-m", "ascend_plugin", "simulate"],
        stdout=writing,
        stderr=subprocess.PIPE,
        text=True,
    ) as demo:
        os.close(writing)
        with os.fdopen(reading, "rb") as pipe:
            first = pipe.readline()  # what `head -1` reads before it exits
        _, stderr = demo.communicate(timeout=120)
    assert b"kubelet stand-in listening" in first
    assert "Traceback" not in stderr, stderr
    assert "BrokenPipeError" not in stderr, stderr
    assert demo.returncode == EXIT_READER_GONE == 141
