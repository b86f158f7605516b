"""The kubelet's PodResources API: which container holds which devices, as the kubelet recorded it.

v1 first (every kubelet since 1.20; it also lists DRA claims' devices), v1alpha1
where v1 is not served (Huawei's plugin asks that alone); 2 s per call. The
socket must be the socket itself, not reached through a symlink (which could
point the plugin at a process posing as the kubelet). When it cannot be asked,
the listing is None; each such state is said once when it begins, and its end too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.kubelet_api import v1, v1alpha1

log = logging.getLogger(__name__)

TIMEOUT = 2.0

_FAILURES = (GRPCError, OSError, TimeoutError, StreamTerminatedError, ProtocolError)


@dataclass(frozen=True, order=True)
class ContainerRef:
    """A container as Kubernetes names it: namespace, pod, container."""

    namespace: str
    pod: str
    container: str

    @property
    def pod_key(self) -> tuple[str, str]:
        return (self.namespace, self.pod)


@dataclass(frozen=True)
class ClaimDevice:
    """One device a DRA driver allocated to a claim a container uses."""

    claim_namespace: str
    claim_name: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class ContainerListing:
    """What the kubelet says one container holds: device IDs per resource, and DRA claims' devices."""

    ref: ContainerRef
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    claims: tuple[ClaimDevice, ...] = ()


Listing = tuple[ContainerListing, ...]


def _by_resource(
    devices: list[v1.ContainerDevices] | list[v1alpha1.ContainerDevices],
) -> Mapping[str, tuple[str, ...]]:
    result: dict[str, tuple[str, ...]] = {}
    for each in devices:
        result[each.resource_name] = (*result.get(each.resource_name, ()), *each.device_ids)
    return MappingProxyType(result)


def _listing(pods: list[v1.PodResources] | list[v1alpha1.PodResources]) -> Listing:
    return tuple(
        ContainerListing(
            ContainerRef(pod.namespace, pod.name, container.name),
            _by_resource(container.devices),
            _claims(container) if isinstance(container, v1.ContainerResources) else (),  # v1 only
        )
        for pod in pods
        for container in pod.containers
    )


def _claims(container: v1.ContainerResources) -> tuple[ClaimDevice, ...]:
    return tuple(
        ClaimDevice(
            claim.claim_namespace, claim.claim_name, device.driver_name, device.pool_name, device.device_name
        )
        for claim in container.dynamic_resources
        for device in claim.claim_resources
    )


class PodResourcesClient:
    """Asks the kubelet's PodResources socket, v1 first, v1alpha1 for old kubelets."""

    def __init__(self, socket: Path, timeout: float = TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        self.version = ""  # the API version that answered last: "v1", "v1alpha1", or "" (none)
        self.problem = ""  # why the last listing failed; empty when it answered
        self._said = ""  # the problem (or version) last logged, so each is said once

    async def listing(self) -> Listing | None:
        """Every container's devices, or None (said once) when the kubelet cannot be asked."""
        answer = await self._list()
        if isinstance(answer, str):
            self._say(
                f"unavailable: {answer}",
                logging.WARNING,
                "the kubelet's PodResources API is unavailable (%s): which container holds which chip is "
                "not known until it answers (the telemetry's container labels stay empty; Volcano mode "
                "takes the held chips from the pods' annotations, and chips handed over before a restart "
                "are known only where huawei.com/AscendReal was written)",
                answer,
            )
            self.version, self.problem = "", answer
            return None
        listing, self.version, self.problem = *answer, ""
        level = logging.WARNING if self.version == "v1alpha1" else logging.INFO
        self._say(
            self.version,
            level,
            "the kubelet's PodResources API answers (%s) at %s",
            self.version,
            self.socket,
        )
        return listing

    async def allocatable(self) -> Mapping[str, tuple[str, ...]] | None:
        """Resource -> every device ID the kubelet can hand out (v1 only); None where not served."""
        channel = self._channel()
        if isinstance(channel, str):
            return None
        try:
            response = await v1.PodResourcesListerStub(channel).get_allocatable_resources(
                v1.AllocatableResourcesRequest(), timeout=self.timeout
            )
        except _FAILURES:
            return None
        finally:
            channel.close()
        return _by_resource(response.devices)

    async def _list(self) -> tuple[Listing, str] | str:
        """The listing and the version that answered, or why there is none."""
        channel = self._channel()
        if isinstance(channel, str):
            return channel
        try:
            try:
                response = await v1.PodResourcesListerStub(channel).list(
                    v1.ListPodResourcesRequest(), timeout=self.timeout
                )
                return _listing(response.pod_resources), "v1"
            except GRPCError as error:
                if error.status is not Status.UNIMPLEMENTED:
                    return _describe(error)
            except _FAILURES as error:
                return _describe(error)
            try:
                answer = await v1alpha1.PodResourcesListerStub(channel).list(
                    v1alpha1.ListPodResourcesRequest(), timeout=self.timeout
                )
            except _FAILURES as error:
                return f"v1 is not served and v1alpha1 failed: {_describe(error)}"
            return _listing(answer.pod_resources), "v1alpha1"
        finally:
            channel.close()

    def _channel(self) -> Channel | str:
        """A channel to the socket, or why it cannot be asked (a symlink, absent)."""
        absolute = os.path.abspath(self.socket)
        real = os.path.realpath(absolute)
        if real != absolute:
            return (
                f"{self.socket} resolves to {real}: symlinks are refused; set pod_resources_socket "
                "(--pod-resources-socket / ASCEND_DP_POD_RESOURCES_SOCKET) to the socket itself"
            )
        if not os.path.exists(absolute):
            return f"{self.socket} does not exist (is the kubelet's pod-resources directory mounted?)"
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
