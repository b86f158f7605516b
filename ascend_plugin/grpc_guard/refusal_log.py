"""RefusalLog: one log line per peer per interval for requests the plugin refused.

Further refusals are counted onto the next line, so a looping client cannot fill the disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ascend_plugin.grpc_guard.refusals import Refused

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL = 10.0
_KEEP_PEERS = 64  # beyond this many peers, quiet ones are summed up and forgotten


@dataclass
class _Peer:
    logged_at: float
    suppressed: int = 0


class RefusalLog:
    """Logs refused requests, at most one line per peer per ``interval`` seconds."""

    def __init__(
        self,
        interval: float = REFUSAL_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        socket: str = "",
    ) -> None:
        self.interval = interval
        self.socket = socket  # the socket the requests came to, for the lines' ``socket`` field
        self.clock = clock
        self._peers: dict[str, _Peer] = {}

    def refused(self, peer: str, refused: Refused) -> None:
        """Record that a request from ``peer`` was refused; log it unless too soon."""
        now = self.clock()
        seen = self._peers.get(peer)
        if seen is not None and now - seen.logged_at < self.interval:
            seen.suppressed += 1
            return
        if len(self._peers) >= _KEEP_PEERS:
            for quiet, entry in list(self._peers.items()):
                if now - entry.logged_at < self.interval:
                    continue
                if entry.suppressed:
                    log.warning(
                        "refused %d more requests from %s (not logged one by one)",
                        entry.suppressed,
                        quiet,
                        extra={"peer": quiet, "suppressed": entry.suppressed, "socket": self.socket},
                    )
                del self._peers[quiet]
        suppressed = seen.suppressed if seen is not None else 0
        note = f" ({suppressed} more from this peer not logged since its last line)" if suppressed else ""
        log.warning(
            "refused a request from %s with %s: %s%s",
            peer,
            refused.status.name,
            refused.reason,
            note,
            extra={"peer": peer, **refused.fields(), "suppressed": suppressed, "socket": self.socket},
        )
        self._peers[peer] = _Peer(now)
