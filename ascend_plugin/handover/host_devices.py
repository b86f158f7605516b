"""The shared device nodes and driver directories present on the host, learned at start and again when
a directory holding them changes (a driver reload moves its mtime), not looked up on every Allocate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ascend_plugin.offers.base import DeviceNode
from backends.families import FamilyTable

MANAGER_IN_CONTAINER = "/dev/davinci_manager"


@dataclass(frozen=True)
class HostMount:
    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class Learned:
    shared: tuple[DeviceNode, ...]
    mounts: tuple[HostMount, ...]


class HostDevices:
    """The family's shared nodes and driver mounts that exist under ``host_root``."""

    def __init__(self, table: FamilyTable, host_root: Path) -> None:
        self.table = table
        self.host_root = host_root
        candidates = (*table.manager_nodes, *table.shared_nodes, *table.driver_mounts)
        self._directories = sorted(
            {self._host(str(PurePosixPath(path).parent)) for path in candidates}
            | {self._host(directory) for directory in table.shared_node_dirs}
        )
        self._stamp: tuple[int, ...] | None = None
        self._learned = Learned((), ())

    @property
    def shared(self) -> tuple[DeviceNode, ...]:
        """The nodes every NPU container gets besides its own devices (manager node first)."""
        return self._current().shared

    @property
    def mounts(self) -> tuple[HostMount, ...]:
        return self._current().mounts

    def _current(self) -> Learned:
        stamp: list[int] = []
        for directory in self._directories:
            try:
                info = os.stat(directory)
            except OSError:
                stamp.extend((0, 0))
                continue
            stamp.extend((info.st_ino, info.st_mtime_ns))
        if tuple(stamp) != self._stamp:
            self._learned = self._learn()
            self._stamp = tuple(stamp)
        return self._learned

    def _learn(self) -> Learned:
        """Look every candidate up (the first manager node found is seen as /dev/davinci_manager)."""
        table = self.table
        nodes = []
        manager = next((path for path in table.manager_nodes if self._host(path).exists()), None)
        if manager is not None:
            nodes.append(DeviceNode(manager, MANAGER_IN_CONTAINER))
        nodes.extend(DeviceNode(path, path) for path in table.shared_nodes if self._host(path).exists())
        nodes.extend(DeviceNode(path, path) for path in self._entries(table.shared_node_dirs))
        mounts = tuple(HostMount(path, path) for path in table.driver_mounts if self._host(path).exists())
        return Learned(tuple(nodes), mounts)

    def _host(self, path: str) -> Path:
        return self.host_root / path.lstrip("/")

    def _entries(self, directories: tuple[str, ...]) -> list[str]:
        """Every entry but a directory right under each of ``directories`` (the 950's UB nodes), sorted."""
        found = []
        for directory in directories:
            try:
                names = sorted(os.listdir(self._host(directory)))
            except OSError:  # absent on this host (an older driver, no UB stack)
                continue
            found += [
                str(PurePosixPath(directory) / name)
                for name in names
                if not self._host(f"{directory}/{name}").is_dir()
            ]
        return found
