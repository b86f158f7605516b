"""Play one FakeScenario on either fake: the pure-Python FakeLibrary or the C libdcmi.so via the real binding.

A test describes the node once as a FakeScenario; a player writes it in the
form its fake reads, opens initialised libraries on it, rewrites it while they
run, and closes everything it opened at the end of the test.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Generic, TypeVar

from backends.dcmi import DcmiLibrary
from backends.fake import FakeLibrary, FakeScenario
from backends.library import DeviceLibrary
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
    """

    kind = "c-fake"

    def __init__(self, scenario_path: Path, built_library: Path) -> None:
        super().__init__(scenario_path)
        self.library_path = scenario_path.parent / "lib" / built_library.name
        self.library_path.parent.mkdir(exist_ok=True)
        shutil.copyfile(built_library, self.library_path)

    def update(self, scenario: FakeScenario) -> None:
        write_scenario(self.scenario_path, scenario)

    def _new_library(self) -> DcmiLibrary:
        return DcmiLibrary(self.library_path, allow_untrusted=True)
