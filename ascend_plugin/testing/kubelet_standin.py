"""A kubelet stand-in, on grpcio, for the demo, the tests and the benchmarks.

It does what the kubelet's device manager does where a plugin can tell (the real one: docs/e2e.md).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import anyio.to_thread
import grpc

from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    AllocateResponse,
    ContainerAllocateRequest,
    ContainerPreferredAllocationRequest,
    DevicePluginOptions,
    Empty,
    ListAndWatchResponse,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    RegisterRequest,
)
from ascend_plugin.naming import MAX_DEVICE_ID_LENGTH, extended_resource_problem
from ascend_plugin.testing.grpc_unix import serve_unix, stop_unix

KUBELET_SOCKET = "kubelet.sock"
DIAL_TIMEOUT = 10.0
# The kubelet gives Allocate and GetPreferredAllocation no deadline; the stand-in's is long, so that only
# a hung plugin fails a call (a refusal that waits for pods on a loaded machine took over 10 s).
CALL_TIMEOUT = 60.0
_PLUGIN = "/v1beta1.DevicePlugin/"
STAGE_TIMEOUT = 15.0  # seconds a simulate timeline waits for each step
HISTORY = 256  # device lists each resource's view keeps, for tests that ask what the kubelet saw when


@dataclass
class ResourceView:
    """What the stand-in knows of one registered resource."""

    resource_name: str
    endpoint: str
    options: DevicePluginOptions
    devices: dict[str, str] = field(default_factory=dict)  # ID -> "Healthy" / "Unhealthy"
    numa: dict[str, tuple[int, ...]] = field(default_factory=dict)  # ID -> NUMA nodes it reported
    updates: int = 0
    stream_open: bool = False
    stream_end: str = ""  # how the last stream ended: "" while open, "OK", or the gRPC status
    ended_at: float | None = None  # time.monotonic() when the last stream ended
    # The latest lists as they arrived: (time.monotonic(), ID -> health), oldest first.
    history: deque[tuple[float, dict[str, str]]] = field(default_factory=lambda: deque(maxlen=HISTORY))

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return sum(1 for health in self.devices.values() if health == "Healthy")


@dataclass(frozen=True)
class Registration:
    """One successful Register call."""

    resource_name: str
    endpoint: str
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Restart:
    """What a :meth:`KubeletStandIn.restart` did."""

    deleted_sockets: tuple[str, ...]
    same_inode: bool
    at: float


class KubeletStandIn:
    """A kubelet device manager on ``directory``."""

    def __init__(self, directory: Path, stop_grace_period: float = 0.0) -> None:
        self.directory = directory
        self.stop_grace_period = stop_grace_period
        self.socket = directory / KUBELET_SOCKET
        self.resources: dict[str, ResourceView] = {}
        self.registrations: list[Registration] = []
        self.refusals: list[str] = []
        self.restarts: list[Restart] = []
        self._refusals_left = 0
        self._refusal_message = ""
        self._server: grpc.Server | None = None
        self._streams: dict[str, grpc.Future] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._changed = threading.Condition()

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Listen on kubelet.sock."""
        handler = grpc.method_handlers_generic_handler(
            "v1beta1.Registration",
            {
                "Register": grpc.unary_unary_rpc_method_handler(
                    self._register, request_deserializer=RegisterRequest.parse, response_serializer=bytes
                )
            },
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self._server = serve_unix(self.socket, [handler], workers=8)

    def stop(self) -> None:
        """Stop serving and drop every plugin connection (the plugins' sockets stay)."""
        server, self._server = self._server, None
        for resource in list(self._streams):
            self._end_stream(resource)
        stop_unix(server, self.socket)

    def restart(self) -> Restart:
        """What a kubelet restart does to the directory: every socket goes, kubelet.sock comes back."""
        before = os.stat(self.socket).st_ino if self.socket.exists() else None
        self.stop()
        deleted = []
        for entry in self.directory.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(entry.lstat().st_mode):
                    entry.unlink()
                    deleted.append(entry.name)
        self.start()
        restart = Restart(tuple(sorted(deleted)), os.stat(self.socket).st_ino == before, time.monotonic())
        with self._changed:
            self.restarts.append(restart)
            self._changed.notify_all()
        return restart

    # -- Registration service ------------------------------------------------------------

    def refuse_registrations(self, count: int, message: str) -> None:
        """Fail the next ``count`` Register calls with ``message`` (a kubelet having a bad moment)."""
        with self._changed:
            self._refusals_left = count
            self._refusal_message = message

    def drop_stream(self, resource_name: str) -> None:
        """End a resource's ListAndWatch stream from the kubelet's side, without restarting."""
        self._end_stream(resource_name)

    def _register(self, request: RegisterRequest, context: grpc.ServicerContext) -> bytes:
        with self._changed:
            refusal = self._refusal_message if self._refusals_left > 0 else None
            self._refusals_left = max(self._refusals_left - 1, 0)
        if refusal := refusal or self._problem(request):
            self._refuse(context, refusal)
        options, channel = self._dial_back(request.endpoint, context)
        self._end_stream(request.resource_name)  # a re-registration replaces the old endpoint
        self._channels[request.resource_name] = channel
        view = ResourceView(request.resource_name, request.endpoint, options)
        with self._changed:
            self.resources[request.resource_name] = view
            self.registrations.append(Registration(request.resource_name, request.endpoint, time.monotonic()))
            self._changed.notify_all()
        stream = self._channels[view.resource_name].unary_stream(
            _PLUGIN + "ListAndWatch",
            request_serializer=bytes,
            response_deserializer=ListAndWatchResponse.parse,
        )(Empty())
        self._streams[view.resource_name] = stream
        view.stream_open = True
        threading.Thread(target=self._consume, args=(view, stream), daemon=True).start()
        return bytes(Empty())

    def _refuse(self, context: grpc.ServicerContext, message: str) -> NoReturn:
        """Fail Register with ``message``, as the kubelet words it."""
        with self._changed:
            self.refusals.append(message)
            self._changed.notify_all()
        context.abort(grpc.StatusCode.UNKNOWN, message)
        raise AssertionError("unreachable: abort raises")

    @staticmethod
    def _problem(request: RegisterRequest) -> str | None:
        if request.version != "v1beta1":
            return f"Requested device plugin version {request.version!r} is not supported"
        if problem := extended_resource_problem(request.resource_name):
            return f"invalid resource name {request.resource_name!r}: {problem}"
        if not request.endpoint or "/" in request.endpoint:
            return f"invalid endpoint {request.endpoint!r}"
        return None

    def _dial_back(
        self, endpoint: str, context: grpc.ServicerContext
    ) -> tuple[DevicePluginOptions, grpc.Channel]:
        channel = grpc.insecure_channel(f"unix:{self.directory / endpoint}")
        try:
            grpc.channel_ready_future(channel).result(timeout=DIAL_TIMEOUT)
            call = channel.unary_unary(
                _PLUGIN + "GetDevicePluginOptions",
                request_serializer=bytes,
                response_deserializer=DevicePluginOptions.parse,
            )
            options: DevicePluginOptions = call(Empty(), timeout=DIAL_TIMEOUT)
        except (grpc.FutureTimeoutError, grpc.RpcError) as error:
            channel.close()
            self._refuse(context, f"failed to dial device plugin {endpoint}: {error}")
        return options, channel

    # -- ListAndWatch consumption -------------------------------------------------------

    def _consume(self, view: ResourceView, stream: Any) -> None:
        end = "OK"
        try:
            for message in stream:
                with self._changed:
                    view.numa = {
                        device.id: tuple(node.id for node in device.topology.nodes)
                        for device in message.devices
                        if device.topology is not None
                    }
                    view.devices = {
                        device.id: device.health
                        for device in message.devices
                        if len(device.id) <= MAX_DEVICE_ID_LENGTH
                    }
                    view.history.append((time.monotonic(), dict(view.devices)))
                    view.updates += 1
                    self._changed.notify_all()
        except grpc.RpcError as error:
            end = error.code().name
        with self._changed:
            # The kubelet's reaction to a lost plugin: nothing is allocatable any more.
            view.devices = dict.fromkeys(view.devices, "Unhealthy")
            view.stream_open = False
            view.stream_end = end
            view.ended_at = time.monotonic()
            self._changed.notify_all()

    def _end_stream(self, resource_name: str) -> None:
        stream = self._streams.pop(resource_name, None)
        if stream is not None:
            stream.cancel()
        channel = self._channels.pop(resource_name, None)
        if channel is not None:
            channel.close()

    # -- what a pod admission does ---------------------------------------------------------------

    def _unary(self, resource_name: str, method: str, response: Any) -> Callable[..., Any]:
        # Like the kubelet, reuse the connection opened when the plugin registered.
        call = self._channels[resource_name].unary_unary(
            _PLUGIN + method, request_serializer=bytes, response_deserializer=response.parse
        )
        return lambda request: call(request, timeout=CALL_TIMEOUT)

    def allocate(self, resource_name: str, device_ids: Sequence[str]) -> AllocateResponse:
        """Allocate for one container, as the kubelet does at pod admission (raises grpc.RpcError)."""
        request = AllocateRequest(container_requests=[ContainerAllocateRequest(devices_ids=list(device_ids))])
        response: AllocateResponse = self._unary(resource_name, "Allocate", AllocateResponse)(request)
        return response

    def preferred_allocation(
        self, resource_name: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        """The plugin's preferred devices for one container."""
        request = PreferredAllocationRequest(
            container_requests=[
                ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include),
                    allocation_size=size,
                )
            ]
        )
        response: PreferredAllocationResponse = self._unary(
            resource_name, "GetPreferredAllocation", PreferredAllocationResponse
        )(request)
        return list(response.container_responses[0].device_i_ds)

    # -- waiting ------------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[KubeletStandIn], bool], timeout: float, what: str = "") -> None:
        """Block until ``condition(self)`` holds; TimeoutError (naming ``what``) after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"kubelet stand-in: not within {timeout:g} s: {what or condition}")
                self._changed.wait(remaining)

    def node_capacity(self) -> dict[str, int]:
        """The extended resources the node's status would list, with their capacity; one whose stream
        ended stays (every device unhealthy) for ``stop_grace_period`` seconds, as the kubelet's does."""
        now = time.monotonic()
        return {
            name: view.capacity
            for name, view in self.resources.items()
            if view.stream_open or view.ended_at is None or now - view.ended_at < self.stop_grace_period
        }

    def health(self, resource_name: str) -> dict[str, str]:
        """The devices of a resource and their health, as last listed."""
        view = self.resources.get(resource_name)
        return dict(view.devices) if view else {}


class Stage:
    """The kubelet stand-in and the narration of one timeline."""

    def __init__(self, kubelet: KubeletStandIn, out: Callable[[str], None]) -> None:
        self.kubelet = kubelet
        self.out = out
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.started:6.2f}s] {text}")

    async def wait(self, condition: Callable[[KubeletStandIn], bool], what: str) -> None:
        await anyio.to_thread.run_sync(self.kubelet.wait_until, condition, STAGE_TIMEOUT, what)

    async def registered(self, resources: set[str]) -> None:
        """Wait until every resource named is registered with its devices listed."""
        await self.wait(
            lambda k: all(name in k.resources and k.resources[name].updates > 0 for name in resources),
            f"registration of {', '.join(sorted(resources))}",
        )

    async def allocate(self, resource: str, ids: list[str]) -> None:
        """Allocate ``ids`` for one container and say what it gets."""
        response = await anyio.to_thread.run_sync(self.kubelet.allocate, resource, ids)
        container = response.container_responses[0]
        self.say(f"Allocate {resource} [{', '.join(ids)}] ->")
        for spec in container.devices:
            self.say(f"    device {spec.host_path} -> {spec.container_path}")
        for name, value in sorted(container.envs.items()):
            self.say(f"    env    {name}={value}")

    def listing(self) -> None:
        """Every resource the node offers now, with its devices."""
        for resource in sorted(self.kubelet.node_capacity()):
            devices = self.kubelet.health(resource)
            self.say(f"  {resource}: {', '.join(f'{d} ({h})' for d, h in sorted(devices.items()))}")
