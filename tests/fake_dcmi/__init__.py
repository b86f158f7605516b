"""A fake libdcmi.so in C, for running the real cffi binding without Ascend hardware.

``build`` compiles ``fake_dcmi.c`` (cached by content hash under tests/_build/);
``scenario_file`` writes the line format it reads from the same FakeScenario
objects the pure-Python fake plays; ``players`` opens libraries on either fake,
so a test describes a node once and can run it on both.
"""
