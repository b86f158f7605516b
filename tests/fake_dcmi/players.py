"""Play one FakeScenario on either fake: the pure-Python FakeLibrary or the C libdcmi.so via the real binding.

A test describes the node once as a FakeScenario; a player writes it in the
form its fake reads, opens initialised libraries on it, rewrites it while they
run, and closes everything it opened at the end of the test.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Generic, TypeVar

from backends.dcmi import DcmiLibrary
from backends.fake import FakeLibrary, FakeScenario
from backends.library import DeviceLibrary
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import write_scenario

Library = TypeVar("Library", bound=DeviceLibrary)


class ScenarioPlayer(ABC, Generic[Library]):
    """Writes scenarios for one kind of fake and opens libraries on them."""

    kind: str

    def __init__(self, scenario_path: Path) -> None:
        self.scenario_path = scenario_path
        self._opened: list[Library] = []

    @abstractmethod
    def update(self, scenario: FakeScenario) -> None:
        """Replace the scenario under every library already open."""

    @abstractmethod
    def _new_library(self) -> Library: ...

    def open(self, scenario: FakeScenario | None = None, *, init: bool = True) -> Library:
        """A library on ``scenario`` (else the last written); ``dcmi_init`` done unless ``init`` is False."""
        if scenario is not None:
            self.update(scenario)
        library = self._new_library()
        self._opened.append(library)
        if init:
            library.init()
        return library

    def close_all(self) -> None:
        """Close every library this player opened."""
        for library in self._opened:
            library.close()
        self._opened.clear()


class PythonFakePlayer(ScenarioPlayer[FakeLibrary]):
    """backends.fake.FakeLibrary over a JSON scenario."""

    kind = "python-fake"

    def update(self, scenario: FakeScenario) -> None:
        temporary = self.scenario_path.with_name(self.scenario_path.name + ".tmp")
        temporary.write_text(scenario.model_dump_json(), encoding="utf-8")
        temporary.replace(self.scenario_path)

    def _new_library(self) -> FakeLibrary:
        return FakeLibrary(self.scenario_path)


class CFakePlayer(ScenarioPlayer[DcmiLibrary]):
    """The real DcmiLibrary binding over the C fake, reading the line-format scenario.

    Each player loads its own copy of the library: the dynamic loader maps a
    file once per process, so a copy gives every test a driver in its initial
    state (not initialised, nobody subscribed), as a fresh process would.
    The caller points ``FAKE_DCMI_SCENARIO`` at ``scenario_path``.

    ``built_library`` leaves out the functions ``hidden`` names (a variant from
    ``build_fake_library(hidden)``). A scenario whose ``missing`` names more
    is played on a variant that also lacks those, built and copied when a
    library is opened on it, so an old driver is described once for both fakes.
    """

    kind = "c-fake"

    def __init__(self, scenario_path: Path, built_library: Path, hidden: Sequence[str] = ()) -> None:
        super().__init__(scenario_path)
        self._hidden = frozenset(hidden)
        self._missing: frozenset[str] = frozenset()
        self.library_path = self._copy(built_library, "lib")
        self._variants = {self._hidden: self.library_path}

    def _copy(self, built: Path, directory: str) -> Path:
        target = self.scenario_path.parent / directory / built.name
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(built, target)
        return target

    def update(self, scenario: FakeScenario) -> None:
        write_scenario(self.scenario_path, scenario)
        self._missing = scenario.missing_functions()

    def current_library(self) -> Path:
        """The library file that plays the scenario last written (a variant when it lacks functions)."""
        hidden = self._hidden | self._missing
        if hidden not in self._variants:  # copied once: overwriting a mapped library would corrupt it
            built = build_fake_library(sorted(hidden))
            self._variants[hidden] = self._copy(built, f"lib-{built.parent.name}")
        return self._variants[hidden]

    def _new_library(self) -> DcmiLibrary:
        return DcmiLibrary(self.current_library(), allow_untrusted=True)
