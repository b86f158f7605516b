"""Who is at the other end of a unix socket (the kernel's ``SO_PEERCRED``), and which peers a socket answers.

The kubelet's uid is the owner of a directory the kubelet creates for itself (:class:`OwnerOf`): no
setting, and the same trust as the directory's permissions (its owner can replace the socket anyway).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
ROOT_UID = 0


@dataclass(frozen=True)
class Peer:
    """The process at the other end of a connection, as the kernel tells it (SO_PEERCRED)."""

    pid: int | None = None
    uid: int | None = None
    gid: int | None = None
    unknown: str = "a peer whose credentials are unknown"  # how to name a peer without credentials

    def __str__(self) -> str:
        return f"pid {self.pid} (uid {self.uid})" if self.uid is not None else self.unknown


def peer_of(transport: asyncio.BaseTransport) -> Peer:
    """The credentials of a unix socket's peer; an address for any other transport."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
        except OSError:
            return Peer()
        pid, uid, gid = _PEER_CREDENTIALS.unpack(raw)
        return Peer(pid, uid, gid)
    return Peer(unknown=f"peer {transport.get_extra_info('peername')!r}")


def admit_anyone(peer: Peer) -> str:
    """The rule of a socket that answers every peer: no reason to refuse."""
    return ""


@dataclass(frozen=True)
class OwnerOf:
    """Admits only the uid that owns ``directory``: ``who`` ("the kubelet") runs as that uid.

    The owner is read at every call (one stat), so a directory re-created by
    a restarted kubelet counts as it is now; a directory that cannot be read
    stands for root, the kubelet's usual uid.
    """

    directory: Path
    who: str
    admits_itself: bool = False  # also this process's own uid: a socket the plugin calls to check it answers

    def owner(self) -> tuple[int, str]:
        """The uid admitted, and where it comes from."""
        try:
            return os.stat(self.directory).st_uid, f"the owner of {self.directory}"
        except OSError as error:
            return ROOT_UID, f"root: the owner of {self.directory} cannot be read ({error.strerror})"

    def __call__(self, peer: Peer) -> str:
        uid, source = self.owner()
        if peer.uid == uid or (self.admits_itself and peer.uid == os.geteuid()):
            return ""
        return f"this socket answers only {self.who}, uid {uid} ({source}); {peer} is not {self.who}"
