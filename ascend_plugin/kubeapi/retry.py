"""Backoff between attempts at the API server, and a log that does not flood: one line per distinct
problem, DEBUG when it repeats, INFO once it works again. Full jitter: every node of a cluster loses the
API server at once, and must not all come back at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

from ascend_plugin import resilience
from ascend_plugin.kubeapi.client import Kube, connect
from ascend_plugin.kubeapi.errors import Forbidden, KubeConfigError, KubeError, Unauthorized
from ascend_plugin.resilience import Backoff, Sleep

log = logging.getLogger(__name__)

T = TypeVar("T")

# The API server is usually back within seconds (a control-plane restart); the
# cap keeps catching up after a longer outage within a quarter of a minute. Full
# jitter: every node of the DaemonSet retries the same server, and not all at once.
KUBE_BACKOFF = Backoff(0.5, 15.0, jitter=random.random)

# Problems that do not go away by waiting: someone has to change RBAC or config.
_OPERATOR_PROBLEMS = (Forbidden, Unauthorized, KubeConfigError)


class Retrier(resilience.Retrier):
    """A part's attempts at the API server: ERROR for what only an operator can fix, WARNING for the
    rest, and one INFO line when the server answers again."""

    def __init__(self, part: str, backoff: Backoff = KUBE_BACKOFF, sleep: Sleep = anyio.sleep) -> None:
        super().__init__(part, backoff, logger=log, sleep=sleep)

    def succeeded(self) -> int:
        """The part got through to the API server: reset the backoff."""
        attempts = super().succeeded()
        if attempts:
            log.info("%s: the API server answers again", self.part, extra={"part": self.part})
        return attempts

    async def failed(self, error: KubeError) -> None:
        """Log ``error`` (once per distinct problem) and wait before the next attempt."""
        level = logging.ERROR if isinstance(error, _OPERATOR_PROBLEMS) else logging.WARNING
        await self.wait_after(
            str(error), level=level, said=f"{self.part}: {error}", error=type(error).__name__
        )

    async def until_answered(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``'s answer, called again after each KubeError (logged, backed off) until it answers."""
        while True:
            try:
                answer = await call()
            except KubeError as error:
                await self.failed(error)
                continue
            self.succeeded()
            return answer


async def connect_retrying(kubeconfig: Path | None, part: str = "Kubernetes client") -> Kube:
    """A client, retrying with backoff while the configuration cannot be loaded."""
    retry = Retrier(part)
    while True:
        try:
            return await connect(kubeconfig)
        except KubeError as error:
            await retry.failed(error)
