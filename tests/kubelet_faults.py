"""A kubelet stand-in with test-only controls for the moments a real node gets wrong.

:class:`FaultyKubelet` is the grpcio :class:`KubeletStandIn`, unchanged in
what it does, plus controls a test uses to put the plugin where a real kubelet
restart sometimes does:

* :meth:`FaultyKubelet.before_dial_back` runs a hook inside Register, after the
  request's checks and before the kubelet dials the plugin back. A hook that
  deletes the plugin's socket reproduces a new kubelet wiping the directory
  while the plugin's Register is on its way: the dial-back then retries the
  missing path until its 10 s timeout, as grpc-go's blocking dial does, and it
  goes on even if the plugin gives the call up (the kubelet dials with a
  context of its own, not the call's).
* :meth:`FaultyKubelet.relisten` serves a new ``kubelet.sock`` while the old
  listener keeps the connections it has, as a kubelet does when it re-listens
  after a failure without restarting.
* :attr:`FaultyKubelet.calls` records every Register call: when it arrived,
  when it answered, and how.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from ascend_plugin.kubelet_api.v1beta1 import DevicePluginOptions, RegisterRequest
from ascend_plugin.testing.kubelet_standin import KubeletStandIn


@dataclass
class RegisterCall:
    """One Register call as the stand-in handled it."""

    resource_name: str
    received: float  # time.monotonic()
    finished: float | None = None
    outcome: str = ""  # "OK", or the message of the failure


class FaultyKubelet(KubeletStandIn):
    """The kubelet stand-in, with hooks that reproduce a kubelet restart's worst moments."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.calls: list[RegisterCall] = []
        self._before_dial_back: Callable[[Path], None] | None = None
        self._old_servers: list[grpc.Server] = []

    def before_dial_back(self, hook: Callable[[Path], None] | None) -> None:
        """Run ``hook(plugin socket path)`` in every Register before the dial-back (None: stop)."""
        self._before_dial_back = hook

    def relisten(self) -> None:
        """A new kubelet.sock and listener; the old listener keeps serving the connections it has."""
        with self._changed:
            old, self._server = self._server, None
        if old is not None:
            self._old_servers.append(old)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        self.start()

    def stop(self) -> None:
        for server in self._old_servers:
            server.stop(grace=None).wait()
        self._old_servers.clear()
        super().stop()

    def pending_calls(self) -> list[RegisterCall]:
        """Register calls not answered yet."""
        with self._changed:
            return [call for call in self.calls if call.finished is None]

    def _register(self, request: RegisterRequest, context: grpc.ServicerContext) -> bytes:
        call = RegisterCall(request.resource_name, time.monotonic())
        with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        try:
            answer = super()._register(request, context)
        except BaseException as error:
            self._finish(call, str(error) or type(error).__name__)
            raise
        self._finish(call, "OK")
        return answer

    def _dial_back(
        self, endpoint: str, context: grpc.ServicerContext
    ) -> tuple[DevicePluginOptions, grpc.Channel]:
        hook = self._before_dial_back
        if hook is not None:
            hook(self.directory / endpoint)
        return super()._dial_back(endpoint, context)

    def _finish(self, call: RegisterCall, outcome: str) -> None:
        with self._changed:
            call.finished = time.monotonic()
            call.outcome = outcome
            self._changed.notify_all()
