"""What the fake driver remembers beyond its scenario: vNPUs made or destroyed, chips resetting.

Kept in ``<scenario>.driver-state`` (deleting it reboots the node), one record a line, the same format for
both fakes::

    vdev phy=0 id=100 template=vir02 aic=2.0 memory_mb=6144 vfg=0
    gone phy=0 id=101
    reset phy=3 since_ns=81234567890 scenario=1234:560:1700000000000000000:1700000000000000000 count=2

``reset``: started at ``since_ns`` (monotonic), under the scenario of that stamp (inode, size, mtime,
ctime), the chip's ``count``-th reset. Writers hold a ``flock`` on ``<file>.lock`` and replace the file
atomically.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

log = logging.getLogger(__name__)

Stamp = tuple[int, int, int, int]  # inode, size, mtime ns, ctime ns


def file_stamp(path: Path) -> Stamp | None:
    """What tells one version of a file from another (None when it does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class MadeVdev:
    """A vNPU ``dcmi_create_vdevice`` made."""

    phy_id: int
    vdev_id: int
    template: str
    aicore: float
    memory_mb: int
    vfg_id: int


@dataclass(frozen=True)
class Reset:
    """The latest reset of one chip: when it began, the scenario it began under, and how many it had."""

    phy_id: int
    since_ns: int
    scenario: Stamp
    count: int = 1


@dataclass(frozen=True)
class DriverState:
    """Everything the driver remembers."""

    made: tuple[MadeVdev, ...] = ()
    gone: frozenset[tuple[int, int]] = frozenset()  # (phy id, vdev id) of scenario vNPUs destroyed
    resets: tuple[Reset, ...] = ()

    def reset_of(self, phy_id: int) -> Reset | None:
        return next((reset for reset in self.resets if reset.phy_id == phy_id), None)

    def with_reset(self, reset: Reset) -> DriverState:
        """The chip's reset ``reset`` began: it replaces the chip's last one, and counts one more."""
        before = self.reset_of(reset.phy_id)
        counted = replace(reset, count=before.count + 1) if before is not None else reset
        others = tuple(r for r in self.resets if r.phy_id != reset.phy_id)
        return replace(self, resets=(*others, counted))


def _fields(words: list[str]) -> dict[str, str]:
    return dict(word.split("=", 1) for word in words if "=" in word)


def _stamp(text: str) -> Stamp:
    ino, size, mtime, ctime = (int(part) for part in text.split(":"))
    return (ino, size, mtime, ctime)


def parse(text: str) -> DriverState:
    """The state in ``text``; a line that cannot be read is logged and skipped."""
    made: list[MadeVdev] = []
    gone: set[tuple[int, int]] = set()
    resets: list[Reset] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        values = _fields(words[1:])
        try:
            if words[0] == "vdev":
                made.append(
                    MadeVdev(
                        phy_id=int(values["phy"]),
                        vdev_id=int(values["id"]),
                        template=values["template"],
                        aicore=float(values["aic"]),
                        memory_mb=int(values["memory_mb"]),
                        vfg_id=int(values["vfg"]),
                    )
                )
            elif words[0] == "gone":
                gone.add((int(values["phy"]), int(values["id"])))
            elif words[0] == "reset":
                resets.append(
                    Reset(
                        int(values["phy"]),
                        int(values["since_ns"]),
                        _stamp(values["scenario"]),
                        int(values.get("count", "1")),
                    )
                )
            else:
                raise ValueError(f"unknown record {words[0]!r}")
        except (KeyError, ValueError) as error:
            log.error("fake driver state line %d is unreadable (%s); it is skipped: %r", number, error, line)
    return DriverState(tuple(made), frozenset(gone), tuple(resets))


def render(state: DriverState) -> str:
    """``state`` in the line format (the C fake writes the same)."""
    lines = ["# fake DCMI driver state: vNPUs made or destroyed, chips resetting"]
    lines += [
        f"vdev phy={v.phy_id} id={v.vdev_id} template={v.template} aic={v.aicore!r} "
        f"memory_mb={v.memory_mb} vfg={v.vfg_id}"
        for v in state.made
    ]
    lines += [f"gone phy={phy} id={vdev}" for phy, vdev in sorted(state.gone)]
    lines += [
        f"reset phy={r.phy_id} since_ns={r.since_ns} scenario={':'.join(str(part) for part in r.scenario)} "
        f"count={r.count}"
        for r in state.resets
    ]
    return "\n".join(lines) + "\n"


@dataclass
class DriverStateFile:
    """The state file of one scenario, re-read whenever another process changed it."""

    path: Path
    _stamp: Stamp | None = field(default=None, init=False)
    _state: DriverState = field(default_factory=DriverState, init=False)

    @classmethod
    def beside(cls, scenario: Path) -> DriverStateFile:
        return cls(scenario.with_name(scenario.name + ".driver-state"))

    def read(self) -> DriverState:
        """The state as the file has it now (empty when there is none)."""
        stamp = file_stamp(self.path)
        if stamp != self._stamp:
            self._stamp = stamp
            self._state = self._load()
        return self._state

    def _load(self) -> DriverState:
        try:
            return parse(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return DriverState()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def change(self, edit: Callable[[DriverState], DriverState]) -> DriverState:
        """Apply ``edit`` to the current state and write the result, other writers held off meanwhile."""
        with self._locked():
            state = edit(self._load())
            temporary = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            temporary.write_text(render(state), encoding="utf-8")
            temporary.replace(self.path)
            self._stamp, self._state = file_stamp(self.path), state
        return state
