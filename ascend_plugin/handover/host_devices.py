"""The shared device nodes and driver directories present on the host, learned at start and again when
a directory holding them changes (a driver reload moves its mtime), not looked up on every Allocate.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from ascend_plugin.offers.base import DeviceNode
from backends.families import FamilyTable
from backends.library import SuperPodInfo

MANAGER_IN_CONTAINER = "/dev/davinci_manager"
# Where HCCL finds the driver's description of the node's links (Huawei's plugin sets it on a 950).
TOPOLOGY_ENV = "HCCL_TOPO_FILE_PATH"


@dataclass(frozen=True)
class HostMount:
    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class Learned:
    shared: tuple[DeviceNode, ...]
    mounts: tuple[HostMount, ...]
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    unnamed: str = ""  # why the family's topology file is not named (empty: named, or none to name)


class HostDevices:
    """The family's shared nodes, driver mounts and topology file that exist under ``host_root``
    (``super_pod``: the node's place, whose product picks the topology file)."""

    def __init__(self, table: FamilyTable, host_root: Path, super_pod: SuperPodInfo | None = None) -> None:
        self.table = table
        self.host_root = host_root
        self.topology_file, self._no_file = table.topology_file(super_pod)
        topology = (self.topology_file,) if self.topology_file else ()
        candidates = (*table.manager_nodes, *table.shared_nodes, *table.driver_mounts, *topology)
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

    @property
    def env(self) -> Mapping[str, str]:
        """The environment every NPU container gets: ``HCCL_TOPO_FILE_PATH`` on a 950 whose file exists."""
        return self._current().env

    @property
    def unnamed(self) -> str:
        """Why the family's topology file is not in :attr:`env`; empty when it is, or the family has none."""
        return self._current().unnamed

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
        env: dict[str, str] = {}
        unnamed = self._no_file
        if self.topology_file is not None:
            if self._host(self.topology_file).is_file():
                env[TOPOLOGY_ENV] = self.topology_file
            else:
                unnamed = f"the node's topology file {self.topology_file} is not on the host"
        return Learned(tuple(nodes), mounts, MappingProxyType(env), unnamed)

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
