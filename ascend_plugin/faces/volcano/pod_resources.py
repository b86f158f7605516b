"""The kubelet's PodResources API: which pod holds which device IDs, as the kubelet recorded it.

Huawei's plugin asks v1alpha1 ``List`` only; this client asks v1 first (every
kubelet since 1.20) and falls back to v1alpha1 where v1 is not served. Each
call has a 2-second deadline. The socket path must be the socket itself, not a
symlink anywhere along it: a symlink would let whoever can write there point the
plugin at another process pretending to be the kubelet.

When the socket is absent, refused, or answers neither version, the caller falls
back to what the pods' annotations say; each such state is said once, when it
begins, and its end once too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.kubelet_api import v1, v1alpha1

log = logging.getLogger(__name__)

TIMEOUT = 2.0

# Pod (namespace, name) -> resource -> the device IDs its containers hold.
Holdings = Mapping[tuple[str, str], Mapping[str, tuple[str, ...]]]

_FAILURES = (GRPCError, OSError, TimeoutError, StreamTerminatedError, ProtocolError)


class PodResourcesUnavailable(Exception):
    """The kubelet's PodResources API cannot be asked; the message says why."""


def _holdings(pods: list[v1.PodResources] | list[v1alpha1.PodResources]) -> Holdings:
    result: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
    for pod in pods:
        held = result.setdefault((pod.namespace, pod.name), {})
        for container in pod.containers:
            for devices in container.devices:
                held[devices.resource_name] = (*held.get(devices.resource_name, ()), *devices.device_ids)
    return MappingProxyType({key: MappingProxyType(value) for key, value in result.items()})


class PodResourcesClient:
    """Asks the kubelet's PodResources socket, v1 first, v1alpha1 for old kubelets."""

    def __init__(self, socket: Path, timeout: float = TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        self.version = ""  # the API version that answered last: "v1", "v1alpha1", or "" (none)
        self._said = ""  # the problem (or version) last logged, so each is said once

    async def holdings(self) -> Holdings | None:
        """Every pod's devices, or None (said once) when the kubelet cannot be asked."""
        try:
            holdings, version = await self._list()
        except PodResourcesUnavailable as problem:
            self._say(
                f"unavailable: {problem}",
                logging.WARNING,
                "the kubelet's PodResources API is unavailable (%s): which pod holds which device IDs "
                "comes from the pods' annotations, and chips handed over before a restart are known only "
                "where huawei.com/AscendReal was written",
                problem,
            )
            self.version = ""
            return None
        self.version = version
        level = logging.WARNING if version == "v1alpha1" else logging.INFO
        self._say(version, level, "the kubelet's PodResources API answers (%s) at %s", version, self.socket)
        return holdings

    async def allocatable(self) -> Mapping[str, tuple[str, ...]] | None:
        """Resource -> every device ID the kubelet can hand out (v1 only); None where not served."""
        try:
            channel = self._channel()
        except PodResourcesUnavailable:
            return None
        try:
            response = await v1.PodResourcesListerStub(channel).get_allocatable_resources(
                v1.AllocatableResourcesRequest(), timeout=self.timeout
            )
        except _FAILURES:
            return None
        finally:
            channel.close()
        result: dict[str, tuple[str, ...]] = {}
        for devices in response.devices:
            result[devices.resource_name] = (*result.get(devices.resource_name, ()), *devices.device_ids)
        return MappingProxyType(result)

    async def _list(self) -> tuple[Holdings, str]:
        channel = self._channel()
        try:
            try:
                response = await v1.PodResourcesListerStub(channel).list(
                    v1.ListPodResourcesRequest(), timeout=self.timeout
                )
                return _holdings(response.pod_resources), "v1"
            except GRPCError as error:
                if error.status is not Status.UNIMPLEMENTED:
                    raise PodResourcesUnavailable(_describe(error)) from error
            except _FAILURES as error:
                raise PodResourcesUnavailable(_describe(error)) from error
            try:
                answer = await v1alpha1.PodResourcesListerStub(channel).list(
                    v1alpha1.ListPodResourcesRequest(), timeout=self.timeout
                )
            except _FAILURES as error:
                raise PodResourcesUnavailable(
                    f"v1 is not served and v1alpha1 failed: {_describe(error)}"
                ) from error
            return _holdings(answer.pod_resources), "v1alpha1"
        finally:
            channel.close()

    def _channel(self) -> Channel:
        """A channel to the socket, once the path passed the checks."""
        absolute = os.path.abspath(self.socket)
        real = os.path.realpath(absolute)
        if real != absolute:
            raise PodResourcesUnavailable(
                f"{self.socket} resolves to {real}: symlinks are refused; set pod_resources_socket "
                "(--pod-resources-socket / ASCEND_DP_POD_RESOURCES_SOCKET) to the socket itself"
            )
        if not os.path.exists(absolute):
            raise PodResourcesUnavailable(
                f"{self.socket} does not exist (is the kubelet's pod-resources directory mounted?)"
            )
        return Channel(path=absolute)

    def _say(self, state: str, level: int, message: str, *args: object) -> None:
        if state != self._said:
            log.log(level, message, *args, extra={"pod_resources": state})
            self._said = state


def _describe(error: BaseException) -> str:
    if isinstance(error, GRPCError):
        return f"the kubelet answered {error.status.name}: {error.message}"
    if isinstance(error, TimeoutError):
        return f"no answer within {TIMEOUT:g} s"
    if isinstance(error, ConnectionRefusedError):
        return "the socket refuses connections (kubelet restarting?)"
    return f"{type(error).__name__}: {error}"
