"""A fake libdcmi.so in C, for running the real cffi binding without Ascend hardware.

``build`` compiles ``fake_dcmi.c`` (cached by content hash under tests/_build/);
``scenario_file`` writes the line format it reads from the same FakeScenario
objects the pure-Python fake plays, so a test describes a node once and can run
it on either.
"""

from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, render, write_scenario

__all__ = ["SCENARIO_ENV", "build_fake_library", "render", "write_scenario"]
