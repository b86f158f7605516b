"""KubeletRegistrar: register with the kubelet, and again whenever the kubelet restarts.

The kubelet keeps no memory of plugins across restarts: a new kubelet deletes
every socket in the device-plugin directory, re-creates ``kubelet.sock`` and
waits for plugins to register again. It may also re-create ``kubelet.sock``
without a full restart, or drop our ListAndWatch stream. Any of the three
sends the registrar round again: make sure our socket is served, wait for
``kubelet.sock``, register (retrying with backoff, logging the kubelet's own
words), then watch for the next one.

Register must only be sent while our server is serving: the kubelet dials
back and calls GetDevicePluginOptions before it answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.faces.deviceplugin.endpoint import PluginEndpoint
from ascend_plugin.faces.deviceplugin.service import DevicePluginService
from ascend_plugin.grpc_sockets import FileStamp, file_stamp
from ascend_plugin.kubelet_api.v1beta1 import RegisterRequest, RegistrationStub
from ascend_plugin.resilience import Backoff

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
# The kubelet dials back within Register with a 10 s timeout of its own.
REGISTER_TIMEOUT = 15.0
# How long a dropped ListAndWatch stream may go without a successor before we
# re-register (the kubelet closes the old stream when a plugin re-registers).
STREAM_GRACE = 0.5
REGISTER_BACKOFF = Backoff(0.2, 10.0)


class KubeletRegistrar:
    """Keeps the plugin registered with whichever kubelet is running."""

    def __init__(
        self,
        endpoint: PluginEndpoint,
        service: DevicePluginService,
        resource_name: str,
        watch_interval: float,
        register_backoff: Backoff = REGISTER_BACKOFF,
    ) -> None:
        self.endpoint = endpoint
        self.service = service
        self.resource_name = resource_name
        self.watch_interval = watch_interval
        self.register_backoff = register_backoff
        self.kubelet_socket = endpoint.path.parent / KUBELET_SOCKET
        self.registered = False
        self.registrations = 0
        self.last_error = ""
        self._stream_dropped_at: float | None = None
        self._registered_listeners: list[Callable[[], None]] = []
        service.on_stream_closed(self._stream_closed)

    def on_registered(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every successful registration."""
        self._registered_listeners.append(listener)

    async def run(self) -> None:
        """Register, watch, re-register; forever."""
        while True:
            if not self.endpoint.serving:
                await self.endpoint.start()
            stamp = await self._register_with_retries()
            self.registered = True
            reason = await self._watch(stamp)
            self.registered = False
            log.warning("re-registering with the kubelet: %s", reason, extra={"reason": reason})

    # -- registering --------------------------------------------------------------

    async def _register_with_retries(self) -> FileStamp:
        """Register with the current kubelet; return the stamp of the kubelet.sock we reached."""
        attempt = 0
        while True:
            stamp = await self._wait_for_kubelet()
            if not self.endpoint.serving:
                await self.endpoint.start()
            try:
                await self._register()
            except (GRPCError, StreamTerminatedError, ProtocolError, OSError, TimeoutError) as error:
                attempt += 1
                self.last_error = _describe(error)
                delay = self.register_backoff.after(attempt)
                log.error(
                    "registration with the kubelet failed (attempt %d): %s; retrying in %.1f s",
                    attempt,
                    self.last_error,
                    delay,
                    extra={"attempt": attempt, "error": self.last_error},
                )
                await self._sleep_unless_kubelet_changes(delay, stamp)
                continue
            self.registrations += 1
            self.last_error = ""
            self._stream_dropped_at = None
            for listener in self._registered_listeners:
                listener()
            log.info(
                "registered %s with the kubelet",
                self.resource_name,
                extra={"resource": self.resource_name, "endpoint": self.endpoint.socket_name},
            )
            return stamp

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
        """Return once kubelet.sock exists, checking every watch interval."""
        announced = False
        while (stamp := file_stamp(self.kubelet_socket)) is None:
            if not announced:
                log.warning("waiting for the kubelet: %s does not exist", self.kubelet_socket)
                announced = True
            await anyio.sleep(self.watch_interval)
        return stamp

    async def _sleep_unless_kubelet_changes(self, delay: float, stamp: FileStamp) -> None:
        """Back off, but retry at once if a new kubelet appears meanwhile."""
        with anyio.move_on_after(delay):
            # Polling a stat() is the portable way to see a file change here (no inotify in the stdlib).
            while file_stamp(self.kubelet_socket) == stamp:  # noqa: ASYNC110
                await anyio.sleep(self.watch_interval)

    # -- watching ---------------------------------------------------------------------

    async def _watch(self, stamp: FileStamp) -> str:
        """Return, with the reason, when the registration needs renewing."""
        while True:
            await anyio.sleep(self.watch_interval)
            current = file_stamp(self.kubelet_socket)
            if current is None:
                return f"{self.kubelet_socket} was removed (kubelet stopped)"
            if current != stamp:
                return f"{self.kubelet_socket} was re-created (kubelet restarted)"
            if not self.endpoint.serving:
                return f"our socket {self.endpoint.path} was deleted"
            dropped = self._stream_dropped_at
            if dropped is not None:
                if self.service.open_streams > 0:
                    self._stream_dropped_at = None
                elif time.monotonic() - dropped >= STREAM_GRACE:
                    return "the kubelet dropped our ListAndWatch stream"

    def _stream_closed(self) -> None:
        if self.registered and self.service.open_streams == 0:
            self._stream_dropped_at = time.monotonic()


def _describe(error: BaseException) -> str:
    if isinstance(error, GRPCError):
        return f"kubelet answered {error.status.name}: {error.message}"
    if isinstance(error, FileNotFoundError):
        return "kubelet.sock disappeared"
    if isinstance(error, ConnectionRefusedError):
        return "kubelet.sock refuses connections"
    if isinstance(error, StreamTerminatedError | ProtocolError):
        return f"the kubelet closed the connection during Register ({error})"
    if isinstance(error, TimeoutError):
        return f"no answer within {REGISTER_TIMEOUT:g} s"
    return f"{type(error).__name__}: {error}"
