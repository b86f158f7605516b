"""A pure-Python device library driven by a scenario file, for tests and demos."""

from backends.fake.library import FakeLibrary
from backends.fake.scenario import FakeChip, FakeScenario, load_scenario

__all__ = ["FakeChip", "FakeLibrary", "FakeScenario", "load_scenario"]
