"""A kubelet stand-in for DRA drivers, on grpcio: the plugin watcher, the DRA manager, the health stream.

Where a driver can tell, it does what the kubelet does, in its words (the real kubelet: docs/e2e.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, cast

import grpc

from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1, v1beta1
from ascend_plugin.kubelet_api.pluginregistration import InfoRequest, PluginInfo, RegistrationStatus
from ascend_plugin.kubelet_api.v1alpha1 import (
    HealthStatus,
    NodeWatchResourcesRequest,
    NodeWatchResourcesResponse,
)

KUBELET_SERVICES: Final = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # what a 1.34+ kubelet knows
GET_INFO_TIMEOUT: Final = 1.0
NOTIFY_TIMEOUT: Final = 5.0
DIAL_TIMEOUT: Final = 10.0
PREPARE_TIMEOUT: Final = 45.0
_REGISTRATION = "/pluginregistration.Registration/"
_HEALTH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"
_SERVICE_PATHS: Final = {
    "v1.DRAPlugin": ("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/", v1),
    "v1beta1.DRAPlugin": ("/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/", v1beta1),
}


@dataclass(frozen=True)
class KubeletApi:
    """How the stand-in reaches the API server: its URL and a bearer token."""

    url: str
    token: str

    def wipe_slices(self, node: str, driver: str | None = None) -> None:
        """Delete the node's ResourceSlices (of one driver), as the kubelet does (a deletecollection)."""
        selector = f"spec.nodeName={node}" + (f",spec.driver={driver}" if driver else "")
        query = urllib.parse.urlencode({"fieldSelector": selector})
        request = urllib.request.Request(
            f"{self.url}/apis/resource.k8s.io/v1/resourceslices?{query}",
            method="DELETE",
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            json.load(response)


@dataclass(frozen=True)
class DeviceReport:
    """The last health report of one device."""

    health: str  # UNKNOWN, HEALTHY, UNHEALTHY
    message: str
    last_updated: int
    timeout: int


@dataclass
class DriverView:
    """What the stand-in knows of one registered driver."""

    name: str
    socket: Path  # the registration socket it was found by
    endpoint: str
    service: str  # the DRA service the kubelet chose
    supported: tuple[str, ...]
    channel: grpc.Channel
    registered_at: float
    connected: bool = True
    health: dict[tuple[str, str], DeviceReport] = field(default_factory=dict)
    health_messages: int = 0
    health_stream_open: bool = False
    closed: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Refusal:
    """A registration the stand-in refused, with the message the driver was notified of."""

    socket: str
    message: str


class DraKubeletStandIn:
    """A kubelet's plugin watcher and DRA manager on ``registry_dir``, for the node ``node``."""

    watching: ClassVar[set[Path]] = set()  # the registry directories a started stand-in watches

    def __init__(
        self,
        registry_dir: Path,
        node: str,
        api: KubeletApi | None = None,
        *,
        kubelet_services: Sequence[str] = KUBELET_SERVICES,
        health_stream: bool = True,
        wipe_delay: float = 30.0,
        scan_interval: float = 0.05,
        health_retry: float = 5.0,
    ) -> None:
        self.registry_dir = registry_dir
        self.node = node
        self.api = api
        self.kubelet_services = tuple(kubelet_services)
        self.health_stream = health_stream
        self.wipe_delay = wipe_delay
        self.scan_interval = scan_interval
        self.health_retry = health_retry
        self.drivers: dict[str, DriverView] = {}
        self.registrations: list[tuple[str, str, float]] = []  # (driver, chosen service, at)
        self.refusals: list[Refusal] = []
        self.wipes: list[tuple[str | None, float]] = []  # (driver or None for all, at)
        self.get_info_calls = 0
        self._stamps: dict[Path, tuple[int, int]] = {}
        self._unusable_since: dict[str, float] = {}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start as a kubelet does: wipe this node's slices, then watch the registry directory."""
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        DraKubeletStandIn.watching.add(self.registry_dir.resolve())
        self._stop.clear()
        if self.api is not None:
            self.api.wipe_slices(self.node)
            self._record_wipe(None)
        self._spawn(self._scan_forever, "dra-standin-scanner")

    def stop(self) -> None:
        """Stop watching and drop every driver connection (the sockets stay)."""
        DraKubeletStandIn.watching.discard(self.registry_dir.resolve())
        self._stop.set()
        for name in list(self.drivers):
            self._forget(name)
        for thread in self._threads:
            thread.join(timeout=DIAL_TIMEOUT)
        for name in list(self.drivers):  # registered while stopping
            self._forget(name)
        self._threads.clear()
        self._stamps.clear()
        self._unusable_since.clear()

    def restart(self) -> None:
        """A kubelet restart: everything forgotten, this node's slices wiped, the registry scanned again."""
        self.stop()
        self.start()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- plugin watcher ----------------------------------------------------------------------

    def _scan_forever(self) -> None:
        while not self._stop.wait(self.scan_interval):
            self._scan()
            self._check_connections()

    def _scan(self) -> None:
        current: dict[Path, tuple[int, int]] = {}
        with contextlib.suppress(FileNotFoundError):
            for entry in self.registry_dir.iterdir():
                if entry.name.startswith("."):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    info = entry.lstat()
                    if stat.S_ISSOCK(info.st_mode):
                        current[entry] = (info.st_ino, info.st_ctime_ns)
        for path in [path for path in self._stamps if path not in current]:
            del self._stamps[path]
            self._deregister(path)
        for path, stamp in current.items():
            if self._stamps.get(path) != stamp:
                if path in self._stamps:  # re-created: the old registration goes first
                    self._deregister(path)
                self._stamps[path] = stamp
                if not self._register(path):
                    self._stamps.pop(path, None)  # retried at the next scan (gone if stopped meanwhile)

    def _deregister(self, path: Path) -> None:
        for name in [name for name, view in self.drivers.items() if view.socket == path]:
            self._forget(name)
            self._unusable_since.setdefault(name, time.monotonic())

    def _register(self, path: Path) -> bool:
        """Dial, GetInfo, validate, notify; False when the socket could not be asked (try again later)."""
        channel = grpc.insecure_channel(f"unix:{path}")
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=DIAL_TIMEOUT)
                get_info = channel.unary_unary(
                    _REGISTRATION + "GetInfo",
                    request_serializer=bytes,
                    response_deserializer=PluginInfo.parse,
                )
                with self._changed:
                    self.get_info_calls += 1
                info: PluginInfo = get_info(InfoRequest(), timeout=GET_INFO_TIMEOUT)
            except (grpc.FutureTimeoutError, grpc.RpcError):
                return False
            problem = self._validate(info, path)
            if problem is None:
                self._add(info, path)
            self._notify(channel, problem, path)
            return True
        finally:
            channel.close()

    def _validate(self, info: PluginInfo, path: Path) -> str | None:
        if info.type != "DRAPlugin":
            return (
                f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {path}"
            )
        endpoint = info.endpoint or str(path)
        if not info.supported_versions:
            why = "empty list of supported gRPC services (aka supported versions)"
        elif not any(service in self.kubelet_services for service in info.supported_versions):
            why = (
                f"none of services supported by the plugin ({list(info.supported_versions)}) are "
                f"supported by the kubelet ({list(self.kubelet_services)})"
            )
        else:
            view = self.drivers.get(info.name)
            if view is None or view.endpoint != endpoint:
                return None
            why = f"endpoint {endpoint} already registered for DRA driver plugin {info.name}"
        return (
            "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of "
            f"DRA driver plugin {info.name} at endpoint {endpoint}: {why}"
        )

    def _notify(self, channel: grpc.Channel, problem: str | None, path: Path) -> None:
        notify = channel.unary_unary(
            _REGISTRATION + "NotifyRegistrationStatus",
            request_serializer=bytes,
            response_deserializer=lambda _: None,
        )
        status = RegistrationStatus(plugin_registered=problem is None, error=problem or "")
        with contextlib.suppress(grpc.RpcError):
            notify(status, timeout=NOTIFY_TIMEOUT)
        if problem is not None:
            with self._changed:
                self.refusals.append(Refusal(str(path), problem))
                self._changed.notify_all()

    def _add(self, info: PluginInfo, path: Path) -> None:
        self._forget(info.name)  # one instance per driver here (the kubelet prefers the newest)
        service = next(service for service in info.supported_versions if service in self.kubelet_services)
        endpoint = info.endpoint or str(path)
        view = DriverView(
            info.name,
            path,
            endpoint,
            service,
            tuple(info.supported_versions),
            grpc.insecure_channel(f"unix:{endpoint}"),
            time.monotonic(),
        )
        with self._changed:
            self.drivers[info.name] = view
            self.registrations.append((info.name, service, view.registered_at))
            self._unusable_since.pop(info.name, None)
            self._changed.notify_all()
        if self.health_stream:
            self._spawn(lambda: self._watch_health(view), f"dra-standin-health-{info.name}")

    def _forget(self, name: str) -> None:
        view = self.drivers.pop(name, None)
        if view is not None:
            view.closed.set()
            view.channel.close()
            with self._changed:
                self._changed.notify_all()

    # -- the DRA manager: connections and slice wiping -------------------------------------------

    def _check_connections(self) -> None:
        now = time.monotonic()
        for name, view in list(self.drivers.items()):
            connected = _accepts(view.endpoint)
            if connected != view.connected:
                with self._changed:
                    view.connected = connected
                    self._changed.notify_all()
            if connected:
                self._unusable_since.pop(name, None)
            else:
                self._unusable_since.setdefault(name, now)
        for name, since in list(self._unusable_since.items()):
            if now - since >= self.wipe_delay and self.api is not None:
                try:
                    self.api.wipe_slices(self.node, name)
                except OSError:
                    continue  # the API server is away: the kubelet tries again
                del self._unusable_since[name]
                self._record_wipe(name)

    def _record_wipe(self, driver: str | None) -> None:
        with self._changed:
            self.wipes.append((driver, time.monotonic()))
            self._changed.notify_all()

    def _call(self, driver: str, method: str, claims: Sequence[tuple[str, str, str]]) -> Any:
        """``method`` for (namespace, name, uid) claims, on the service the kubelet chose; v1's answer."""
        view = self.drivers.get(driver)
        if view is None:
            raise KeyError(f"DRA driver {driver} is not registered")
        prefix, module = _SERVICE_PATHS[view.service]
        response = getattr(module, f"{method}Response")
        call = view.channel.unary_unary(
            prefix + method, request_serializer=bytes, response_deserializer=response.parse
        )
        request = getattr(module, f"{method}Request")(
            claims=[module.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]
        )
        return getattr(v1, f"{method}Response").parse(bytes(call(request, timeout=PREPARE_TIMEOUT)))

    def prepare(self, driver: str, claims: Sequence[tuple[str, str, str]]) -> v1.NodePrepareResourcesResponse:
        return cast(v1.NodePrepareResourcesResponse, self._call(driver, "NodePrepareResources", claims))

    def unprepare(
        self, driver: str, claims: Sequence[tuple[str, str, str]]
    ) -> v1.NodeUnprepareResourcesResponse:
        return cast(v1.NodeUnprepareResourcesResponse, self._call(driver, "NodeUnprepareResources", claims))

    # -- the health stream -----------------------------------------------------------------------

    def _watch_health(self, view: DriverView) -> None:
        watch = view.channel.unary_stream(
            _HEALTH, request_serializer=bytes, response_deserializer=NodeWatchResourcesResponse.parse
        )
        while not view.closed.is_set() and not self._stop.is_set():
            stream = watch(NodeWatchResourcesRequest())
            stopper = threading.Thread(
                target=_cancel_when, args=(view.closed, self._stop, stream), daemon=True
            )
            stopper.start()
            try:
                for message in stream:
                    self._health_report(view, message)
            except grpc.RpcError:
                pass
            finally:
                stream.cancel()
                stopper.join()
                with self._changed:
                    view.health_stream_open = False
                    self._changed.notify_all()
            if view.closed.wait(self.health_retry):
                return

    def _health_report(self, view: DriverView, message: NodeWatchResourcesResponse) -> None:
        with self._changed:
            view.health_stream_open = True
            view.health_messages += 1
            view.health = {
                (device.device.pool_name, device.device.device_name): DeviceReport(
                    HealthStatus(device.health).name,
                    device.message,
                    device.last_updated_time,
                    device.health_check_timeout_seconds,
                )
                for device in message.devices
                if device.device is not None
            }
            self._changed.notify_all()

    # -- waiting ----------------------------------------------------------------------------------

    def wait_until(
        self, condition: Callable[[DraKubeletStandIn], bool], timeout: float, what: str = ""
    ) -> None:
        """Block until ``condition(self)`` holds; TimeoutError (naming ``what``) after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"DRA kubelet stand-in: not within {timeout:g} s: {what or condition}")
                self._changed.wait(min(remaining, self.scan_interval))


def _accepts(endpoint: str) -> bool:
    """Whether a unix socket accepts connections (the kubelet's view: is the driver's gRPC server up)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fsdecode(endpoint))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _cancel_when(closed: threading.Event, stopping: threading.Event, stream: Any) -> None:
    """Cancel ``stream`` once the driver is forgotten or the stand-in stops (or the stream is done)."""
    while not (closed.wait(0.05) or stopping.is_set() or stream.done()):
        pass
    stream.cancel()
