"""Backoff between attempts at the API server, and a log that does not flood.

An API server that is down for an hour must not produce a stack trace every few
seconds, yet the first failure, every new kind of failure and the recovery must
each be visible at a glance. So: one line per distinct problem at WARNING (ERROR
for problems only an operator can fix: RBAC, credentials, configuration), the
same problem again only at DEBUG, and one INFO line when it works again.

The waits are jittered: every node of a cluster loses the API server at the same
moment (a control-plane restart), and without a random part they would all come
back at the same moments too, a thousand nodes listing at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from ascend_plugin.kubeapi.client import Kube, connect
from ascend_plugin.kubeapi.errors import Forbidden, KubeConfigError, KubeError, Unauthorized
from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

# The API server is usually back within seconds (a control-plane restart); the
# cap keeps catching up after a longer outage within a quarter of a minute. Full
# jitter: every node of the DaemonSet retries the same server, and not all at once.
KUBE_BACKOFF = Backoff(0.5, 15.0, jitter=random.random)

# Problems that do not go away by waiting: someone has to change RBAC or config.
_OPERATOR_PROBLEMS = (Forbidden, Unauthorized, KubeConfigError)


class Retrier:
    """Attempt counting, backoff and de-duplicated logging for one part."""

    def __init__(
        self,
        part: str,
        backoff: Backoff = KUBE_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.part = part
        self.backoff = backoff
        self.sleep = sleep
        self.attempt = 0  # failed attempts since the last success
        self.failures = 0  # failed attempts in all
        self.problem = ""  # the last failure, as logged; empty once the part gets through

    def succeeded(self) -> None:
        """The part got through to the API server: reset the backoff."""
        if self.attempt:
            log.info("%s: the API server answers again", self.part, extra={"part": self.part})
        self.attempt = 0
        self.problem = ""

    async def failed(self, error: KubeError) -> None:
        """Log ``error`` (once per distinct problem) and wait before the next attempt."""
        self.attempt += 1
        self.failures += 1
        delay = self.backoff.after(self.attempt)
        problem = str(error)
        if problem == self.problem:
            level = logging.DEBUG
        elif isinstance(error, _OPERATOR_PROBLEMS):
            level = logging.ERROR
        else:
            level = logging.WARNING
        log.log(
            level,
            "%s: %s; retrying in %.1f s",
            self.part,
            problem,
            delay,
            extra={"part": self.part, "attempt": self.attempt, "error": type(error).__name__},
        )
        self.problem = problem
        await self.sleep(delay)


async def connect_retrying(kubeconfig: Path | None, part: str = "Kubernetes client") -> Kube:
    """A client, retrying with backoff while the configuration cannot be loaded."""
    retry = Retrier(part)
    while True:
        try:
            return await connect(kubeconfig)
        except KubeError as error:
            await retry.failed(error)
