"""Another plugin on the node: a process serving our socket names, or writing our device-info ConfigMap.

Huawei's plugin uses the same names. This one does not fight: it names the other and waits until it is
gone (our own instances never meet here: the instance lock).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MIGRATION: Final = "docs/migration.md"
# What Huawei's own deployments are called (its build/ascendplugin-*.yaml), for the fix.
HUAWEIS_DAEMONSETS: Final = "ascend-device-plugin-daemonset, ascend-device-plugin-daemonset-910 (Volcano)"
OUR_COMMANDS: Final = ("ascend-device-plugin", "ascend_plugin")


@dataclass(frozen=True)
class SocketServer:
    """The process listening on a unix socket, as far as this process can see it."""

    pid: int  # 0: not visible from here (another pod's PID namespace)
    uid: int
    command: str  # its command line; empty when not visible

    @property
    def ours(self) -> bool:
        """This process, or another instance of this plugin."""
        return self.pid == os.getpid() or any(name in self.command for name in OUR_COMMANDS)

    def describe(self) -> str:
        if self.command:
            return f"pid {self.pid}, uid {self.uid}: {self.command}"
        return f"a process of uid {self.uid} outside this pod's view"


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def socket_server(path: Path) -> SocketServer | None:
    """Who listens on the unix socket ``path``; None when nobody does (absent, or stale).

    A non-blocking connect, nothing sent: a full backlog is someone listening too.
    """
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        code = probe.connect_ex(str(path))
        if code == errno.EAGAIN:
            return SocketServer(0, -1, "")
        if code != 0:
            return None
        pid, uid, _ = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return None
    finally:
        probe.close()
    return SocketServer(pid, uid, _command(pid) if pid > 0 else "")


def foreign_socket(path: Path, server: SocketServer) -> str:
    """Why this plugin does not serve ``path`` now, and what to do: for logs, /readyz and doctor."""
    return (
        f"another process serves {path} ({server.describe()}), most likely Huawei's "
        "ascend-device-plugin; two plugins on one socket name take the kubelet's registration from each "
        "other, so this one waits until it is gone. Remove it first (kubectl -n kube-system get daemonsets: "
        f"Huawei's are named {HUAWEIS_DAEMONSETS}; kubectl -n kube-system delete daemonset <name>), see "
        f"{MIGRATION}"
    )


def foreign_writer(configmap: str, manager: str) -> str:
    """Why this plugin stops writing the device-info ConfigMap, and what to do."""
    who = f" (its field manager: {manager})" if manager else ""
    return (
        f"another process rewrote the device-info ConfigMap {configmap}{who}, most likely Huawei's "
        "ascend-device-plugin on this node; two writers would overwrite each other's device list for "
        "Volcano, so this plugin stops writing it while the other does, and writes again once it has been "
        f"quiet for {FOREIGN_QUIET:.0f} s. Remove the other plugin (kubectl -n kube-system get daemonsets; "
        f"Huawei's are named {HUAWEIS_DAEMONSETS}), see {MIGRATION}"
    )


FOREIGN_QUIET: Final = 600.0  # seconds: twice Huawei's 300 s rewrite of the ConfigMap


class OtherWriter:
    """Tells, from the device-info ConfigMap's versions, when another process keeps rewriting it.

    A version not ours whose device list differs from the one before it is another writer's (a release
    leaves the list alone); while one was seen in the last :data:`FOREIGN_QUIET` seconds, we do not write.
    """

    def __init__(self, data_key: str) -> None:
        self.data_key = data_key
        self.last_seen: float | None = None  # clock() of the last write of another's
        self._version = ""  # the last version looked at, and its device list
        self._listed: object = None

    @property
    def version(self) -> str:
        """The last version of the ConfigMap looked at."""
        return self._version

    def wrote(self, version: str, listed: str | None) -> None:
        """This plugin's own write: its version and device list."""
        self._version, self._listed = version, listed

    def observe(self, stored: Mapping[str, object] | None) -> str | None:
        """The field manager of a write of another's not seen before (or ""); None for anything else."""
        metadata = stored.get("metadata") if stored is not None else None
        data = stored.get("data") if stored is not None else None
        if not isinstance(metadata, Mapping) or not isinstance(data, Mapping):
            return None
        version = str(metadata.get("resourceVersion", ""))
        if version == self._version:
            return None
        listed, previous = data.get(self.data_key), self._listed
        self._version, self._listed = version, listed
        return _last_manager(metadata) if previous is not None and listed != previous else None

    def active(self, now: float) -> bool:
        """Whether another writer wrote within the last FOREIGN_QUIET seconds."""
        return self.last_seen is not None and now - self.last_seen < FOREIGN_QUIET

    def quiet_in(self, now: float) -> float:
        """Seconds until the other writer counts as gone, if it writes nothing more."""
        return max((self.last_seen or now) + FOREIGN_QUIET - now, 0.0)


def _last_manager(metadata: Mapping[str, object]) -> str:
    """The field manager of the most recent update the object records, or ""."""
    entries = metadata.get("managedFields")
    if not isinstance(entries, list):
        return ""
    dated = [entry for entry in entries if isinstance(entry, Mapping) and entry.get("operation") == "Update"]
    latest = max(dated, key=lambda entry: str(entry.get("time", "")), default=None)
    return str(latest.get("manager", "")) if latest is not None else ""
