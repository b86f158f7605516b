"""The process's one API client, lent to every face that talks to the API server: connected when a face
first asks (retrying with backoff), closed when the last is done. kubernetes-asyncio is imported then."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ascend_plugin.kubeapi.client import Kube


class SharedClient:
    """One API client for ``kubeconfig`` (None: the pod's service account), lent to each face in turn."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self.kubeconfig = kubeconfig
        self.connects = 0  # clients made so far (one, unless every face let it go meanwhile)
        self._kube: Kube | None = None
        self._users = 0
        self._lock = anyio.Lock()

    @asynccontextmanager
    async def use(self, part: str) -> AsyncIterator[Kube]:
        """The client, connected (``part`` names who waits for it in the retry lines), for the block."""
        from ascend_plugin.kubeapi.retry import connect_retrying

        async with self._lock:
            if self._kube is None:
                self._kube = await connect_retrying(self.kubeconfig, part)
                self.connects += 1
            self._users += 1
            kube = self._kube
        try:
            yield kube
        finally:
            self._users -= 1
            if not self._users:
                self._kube = None
                with anyio.CancelScope(shield=True):
                    await kube.close()
