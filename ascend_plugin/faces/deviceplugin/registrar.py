"""Registration with the kubelet, again whenever it restarts, and our socket it dials back.

Register is sent only while our socket answers, and abandoned when it goes or a new ``kubelet.sock``
appears; each wait wakes at the directory's next change or look, a failure logged once and retried.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.dir_watch import DirectoryChanges
from ascend_plugin.faces.deviceplugin.service import DevicePluginService
from ascend_plugin.grpc_guard.peers import OwnerOf
from ascend_plugin.grpc_guard.server import GuardedEndpoint
from ascend_plugin.grpc_sockets import FileStamp, file_stamp
from ascend_plugin.kubelet_api.v1beta1 import DevicePluginStub, Empty, RegisterRequest, RegistrationStub
from ascend_plugin.path_facts import PathUnusable, connect_failure, not_a_socket
from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
# The kubelet dials back within Register with a 10 s timeout of its own.
REGISTER_TIMEOUT = 15.0
# While Register is pending (normally milliseconds), look this often for a reason to start over.
PENDING_POLL = 0.01
# How long a dropped ListAndWatch stream may go without a successor before we
# re-register (the kubelet closes the old stream when a plugin re-registers).
STREAM_GRACE = 0.5
# Seen within a millisecond (inotify), a new kubelet.sock can still be between bind() and listen():
# the first retry comes soon, later ones back off to 10 s.
REGISTER_BACKOFF = Backoff(0.02, 10.0)
# Our own server answers a local call in milliseconds; a second means it does not.
ANSWER_TIMEOUT = 1.0


# What an attempt fails with (PathUnusable: our socket cannot be made, or kubelet.sock is no socket).
_FAILURES = (GRPCError, StreamTerminatedError, ProtocolError, OSError, TimeoutError, PathUnusable)


class PluginEndpoint(GuardedEndpoint):
    """Serves one resource's DevicePlugin service on ``<directory>/<socket_name>``."""

    def __init__(self, service: DevicePluginService, directory: Path, socket_name: str) -> None:
        # Only the kubelet (the owner of its device-plugin directory) calls it, and the plugin itself.
        kubelet = OwnerOf(directory, "the kubelet", admits_itself=True)
        rules = dataclasses.replace(service.request_rules(), admit=kubelet)
        super().__init__([service], directory / socket_name, "the device plugin API", rules)
        self.service = service
        self.socket_name = socket_name

    async def answers(self) -> bool:
        """True when a gRPC call on our socket gets our options back, as the kubelet's dial-back will."""
        channel = Channel(path=str(self.path))
        try:
            with anyio.fail_after(ANSWER_TIMEOUT):
                await DevicePluginStub(channel).get_device_plugin_options(Empty())
        except (GRPCError, StreamTerminatedError, ProtocolError, OSError, TimeoutError):
            return False
        finally:
            channel.close()
        return True


class KubeletRegistrar:
    """Keeps the plugin registered with whichever kubelet is running."""

    def __init__(
        self,
        endpoint: PluginEndpoint,
        service: DevicePluginService,
        resource_name: str,
        *,
        changes: DirectoryChanges,
        on_registered: Callable[[], None] = lambda: None,
    ) -> None:
        self.endpoint = endpoint
        self.changes = changes
        self.service = service
        self.resource_name = resource_name
        self.kubelet_socket = endpoint.path.parent / KUBELET_SOCKET
        self.registered = False
        self.last_error = ""
        self._stream_dropped_at: float | None = None
        self.on_registered = on_registered  # after every successful registration
        service.on_stream_closed = self._stream_closed

    async def run(self) -> None:
        """Register, watch, re-register; forever (a run that fails is registered no more)."""
        try:
            while True:
                stamp = await self._register_with_retries()
                self.registered = True
                reason = await self._watch(stamp)
                self.registered = False
                log.warning("re-registering with the kubelet: %s", reason, extra={"reason": reason})
        finally:
            self.registered = False

    # -- registering --------------------------------------------------------------

    async def _register_with_retries(self) -> FileStamp:
        """Register with the current kubelet; return the stamp of the kubelet.sock we reached."""
        attempt = abandons = 0
        while True:
            try:
                if not self.endpoint.serving:  # up before the kubelet, which must be able to dial back
                    await self.endpoint.start()
                stamp = await self._wait_for_kubelet()
                await self._ensure_answering()
                abandoned = await self._register_watched(stamp)
            except _FAILURES as error:
                attempt += 1
                # Nobody listening on kubelet.sock is a kubelet that is down or starting, not a mistake.
                level = logging.WARNING if isinstance(error, ConnectionRefusedError) else logging.ERROR
                self._failed(attempt, _describe(error, self.kubelet_socket), level)
                await self._sleep_unless_kubelet_changes(
                    REGISTER_BACKOFF.after(attempt), file_stamp(self.kubelet_socket)
                )
                continue
            if abandoned is not None:
                abandons += 1
                if abandons == 1:
                    log.warning("Register abandoned: %s; registering again at once", abandoned)
                    continue
                # Again and again: something keeps changing the directory (an old plugin without the
                # instance lock deleting our socket?). Back off rather than spin.
                delay = REGISTER_BACKOFF.after(abandons - 1)
                log.warning(
                    "Register abandoned %d times in a row: %s; again in %g s", abandons, abandoned, delay
                )
                await anyio.sleep(delay)
                continue
            if self.last_error:
                log.info("registration works again after %d failed attempt(s)", attempt)
            self.last_error = ""
            self._stream_dropped_at = None
            self.on_registered()
            log.info(
                "registered %s with the kubelet",
                self.resource_name,
                extra={"resource": self.resource_name, "endpoint": self.endpoint.socket_name},
            )
            return stamp

    def _failed(self, attempt: int, description: str, level: int) -> None:
        """Log a failure once; the same failure again only at DEBUG."""
        delay = REGISTER_BACKOFF.after(attempt)
        extra = {"attempt": attempt, "error": description}
        if description != self.last_error:
            log.log(
                level,
                "registration with the kubelet failed: %s; retrying with backoff (next in %g s)",
                description,
                delay,
                extra=extra,
            )
        else:
            log.debug(
                "registration attempt %d failed the same way; retrying in %g s", attempt, delay, extra=extra
            )
        self.last_error = description

    async def _ensure_answering(self) -> None:
        """Make sure our socket exists and answers right before Register, re-creating it if not."""
        if not self.endpoint.serving:
            log.warning("our socket %s was deleted before Register: re-creating it", self.endpoint.path)
        elif not await self.endpoint.answers():
            log.warning("our socket %s does not answer: re-creating it", self.endpoint.path)
        else:
            return
        await self.endpoint.start()

    async def _register_watched(self, stamp: FileStamp) -> str | None:
        """Register; None once the kubelet answered, else why the pending Register was abandoned."""
        failure: Exception | None = None
        reason: str | None = None
        async with anyio.create_task_group() as group:

            async def register() -> None:
                nonlocal failure
                try:
                    await self._register()
                except _FAILURES as error:
                    failure = error
                group.cancel_scope.cancel()

            group.start_soon(register, name=f"Register {self.resource_name}")
            reason = await self._pending_change(stamp)
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return reason

    async def _pending_change(self, stamp: FileStamp) -> str:
        """Return, with the reason, once a pending Register can no longer succeed."""
        while True:
            if file_stamp(self.kubelet_socket) != stamp:
                return f"{self.kubelet_socket} changed while Register was pending (a new kubelet)"
            if not self.endpoint.serving:
                return f"our socket {self.endpoint.path} was deleted while Register was pending"
            await self.changes.wait(PENDING_POLL)

    async def _register(self) -> None:
        channel = Channel(path=str(self.kubelet_socket))
        try:
            stub = RegistrationStub(channel)
            request = RegisterRequest(
                version=API_VERSION,
                endpoint=self.endpoint.socket_name,
                resource_name=self.resource_name,
                options=self.service.options,
            )
            with anyio.fail_after(REGISTER_TIMEOUT):
                await stub.register(request)
        finally:
            channel.close()

    async def _wait_for_kubelet(self) -> FileStamp:
        """Return once kubelet.sock exists, looking at every change; raise if it is no socket."""
        announced = False
        while True:
            if (problem := not_a_socket(self.kubelet_socket)) is not None:
                raise PathUnusable(problem)
            if (stamp := file_stamp(self.kubelet_socket)) is not None:
                return stamp
            if not announced:
                log.warning("waiting for the kubelet: %s does not exist", self.kubelet_socket)
                announced = True
            await self.changes.wait(self.changes.look_every)

    async def _sleep_unless_kubelet_changes(self, delay: float, stamp: FileStamp | None) -> None:
        """Back off, but retry at once if a new kubelet appears meanwhile."""
        with anyio.move_on_after(delay):
            while file_stamp(self.kubelet_socket) == stamp:
                await self.changes.wait(self.changes.look_every)

    # -- watching ---------------------------------------------------------------------

    async def _watch(self, stamp: FileStamp) -> str:
        """Return, with the reason, when the registration needs renewing."""
        while (reason := self._renewal_reason(stamp)) is None:
            longest = self.changes.look_every
            if (dropped := self._stream_dropped_at) is not None:  # look again when its grace is over
                longest = min(longest, max(dropped + STREAM_GRACE - time.monotonic(), 0.0) + 0.01)
            await self.changes.wait(longest)
        return reason

    def _renewal_reason(self, stamp: FileStamp) -> str | None:
        current = file_stamp(self.kubelet_socket)
        if current is None:
            return f"{self.kubelet_socket} was removed (kubelet stopped)"
        if current != stamp:
            return f"{self.kubelet_socket} was re-created (kubelet restarted)"
        if not self.endpoint.serving:
            return f"our socket {self.endpoint.path} was deleted"
        dropped = self._stream_dropped_at
        if dropped is not None:
            if self.service.streams.count > 0:
                self._stream_dropped_at = None
            elif time.monotonic() - dropped >= STREAM_GRACE:
                return "the kubelet dropped our ListAndWatch stream"
        return None

    def _stream_closed(self) -> None:
        if self.registered and self.service.streams.count == 0:
            self._stream_dropped_at = time.monotonic()
            self.changes.look_again()  # the watch sleeps on: it must time the grace from now


def _describe(error: BaseException, kubelet_socket: Path) -> str:
    if isinstance(error, PathUnusable):
        return str(error)
    if isinstance(error, GRPCError):
        return f"kubelet answered {error.status.name}: {error.message}"
    if isinstance(error, TimeoutError):  # before OSError, of which it is one
        return f"no answer within {REGISTER_TIMEOUT:g} s"
    if isinstance(error, OSError):
        return connect_failure(kubelet_socket, error)
    if isinstance(error, StreamTerminatedError | ProtocolError):
        return f"the kubelet closed the connection during Register ({error})"
    return f"{type(error).__name__}: {error}"
