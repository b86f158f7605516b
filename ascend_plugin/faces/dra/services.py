"""The gRPC services the kubelet calls on the driver: registration, DRAPlugin (v1, v1beta1), device health.

The registration service answers the plugin watcher on ``<registry>/<driver>-reg.sock``; DRAPlugin and
the health stream are served on ``<plugin dir>/dra.sock``. docs/dra.md: "Registration", "Health".
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.faces.dra.checkpoint import ClaimRef
from ascend_plugin.faces.dra.names import PLUGIN_TYPE, SUPPORTED_SERVICES, device_name
from ascend_plugin.faces.dra.prepare import ClaimPreparer, Outcome
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1, v1beta1
from ascend_plugin.kubelet_api.pluginregistration import (
    InfoRequest,
    PluginInfo,
    RegistrationBase,
    RegistrationStatus,
    RegistrationStatusResponse,
)
from ascend_plugin.kubelet_api.v1alpha1 import (
    DeviceHealth,
    DeviceIdentifier,
    DraResourceHealthBase,
    HealthStatus,
    NodeWatchResourcesRequest,
    NodeWatchResourcesResponse,
)
from ascend_plugin.streams import OpenStreams

log = logging.getLogger(__name__)

HEARTBEAT: Final = 10.0  # seconds between health reports when nothing changes
REPORT_TIMEOUT: Final = 30  # seconds the kubelet may trust a report (three heartbeats)
MAX_MESSAGE: Final = 1024


class RegistrationService(RegistrationBase):
    """What the driver tells the plugin watcher, and what the kubelet said back (a refusal is logged as an
    error with the kubelet's reason, and keeps the driver not ready)."""

    def __init__(self, driver: str, endpoint: Path) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.registered = False
        self.registrations = 0
        self.last_error = ""
        self.changes = Changes()
        self._registered_listeners: list[Callable[[], None]] = []

    async def wait_registered(self) -> None:
        """Return once the kubelet has confirmed a registration (at once if it has)."""
        while not self.registered:
            await self.changes.wait_for_change(self.changes.version)

    def on_registered(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every registration the kubelet confirms."""
        self._registered_listeners.append(listener)

    def forget(self) -> None:
        """Our registration socket is gone: the kubelet's plugin watcher dropped the driver with it."""
        self.registered = False

    async def get_info(self, message: InfoRequest) -> PluginInfo:
        return PluginInfo(
            type=PLUGIN_TYPE,
            name=self.driver,
            endpoint=str(self.endpoint.absolute()),
            supported_versions=list(SUPPORTED_SERVICES),
        )

    async def notify_registration_status(self, message: RegistrationStatus) -> RegistrationStatusResponse:
        if message.plugin_registered:
            self.registered = True
            self.registrations += 1
            self.last_error = ""
            log.info(
                "the kubelet registered DRA driver %s", self.driver, extra={"endpoint": str(self.endpoint)}
            )
            self.changes.bump()
            for listener in self._registered_listeners:
                listener()
        else:
            self.registered = False
            self.last_error = message.error or "(the kubelet gave no reason)"
            log.error(
                "the kubelet refused to register DRA driver %s: %s",
                self.driver,
                self.last_error,
                extra={"error": self.last_error},
            )
        return RegistrationStatusResponse()


def _refs(claims: list[v1.Claim]) -> list[ClaimRef]:
    return [ClaimRef(claim.namespace, claim.name, claim.uid) for claim in claims]


def _prepared(outcome: Outcome) -> v1.NodePrepareResourceResponse:
    if outcome.claim is None:
        return v1.NodePrepareResourceResponse(error=outcome.error)
    return v1.NodePrepareResourceResponse(
        devices=[
            v1.Device(
                request_names=list(device.requests),
                pool_name=outcome.claim.pool,
                device_name=device.device,
                cdi_device_ids=list(device.cdi_ids),
                share_id=device.share_id,
            )
            for device in outcome.claim.devices
        ]
    )


class DraPluginV1(v1.DraPluginBase):
    """``/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`` (kubelets of 1.34 and later)."""

    def __init__(self, preparer: ClaimPreparer) -> None:
        self.preparer = preparer

    async def node_prepare_resources(
        self, message: v1.NodePrepareResourcesRequest
    ) -> v1.NodePrepareResourcesResponse:
        outcomes = await self.preparer.prepare(_refs(message.claims))
        return v1.NodePrepareResourcesResponse(
            claims={uid: _prepared(outcome) for uid, outcome in outcomes.items()}
        )

    async def node_unprepare_resources(
        self, message: v1.NodeUnprepareResourcesRequest
    ) -> v1.NodeUnprepareResourcesResponse:
        errors = await self.preparer.unprepare(_refs(message.claims))
        return v1.NodeUnprepareResourcesResponse(
            claims={uid: v1.NodeUnprepareResourceResponse(error=error) for uid, error in errors.items()}
        )


class DraPluginV1beta1(v1beta1.DraPluginBase):
    """The v1 service under v1beta1's name (1.32, 1.33): the messages are wire-identical, so the request is
    read as v1's and the v1 answer's bytes sent as v1beta1's."""

    def __init__(self, v1_service: DraPluginV1) -> None:
        self.v1 = v1_service

    async def node_prepare_resources(
        self, message: v1beta1.NodePrepareResourcesRequest
    ) -> v1beta1.NodePrepareResourcesResponse:
        answer = await self.v1.node_prepare_resources(v1.NodePrepareResourcesRequest.parse(bytes(message)))
        return v1beta1.NodePrepareResourcesResponse.parse(bytes(answer))

    async def node_unprepare_resources(
        self, message: v1beta1.NodeUnprepareResourcesRequest
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        answer = await self.v1.node_unprepare_resources(
            v1.NodeUnprepareResourcesRequest.parse(bytes(message))
        )
        return v1beta1.NodeUnprepareResourcesResponse.parse(bytes(answer))


def _status(state: ChipState) -> HealthStatus:
    if not state.health.known or state.vnpus is None:
        return HealthStatus.UNKNOWN
    return HealthStatus.HEALTHY if state.healthy else HealthStatus.UNHEALTHY


def _whole(state: ChipState) -> list[str]:
    """A chip's device; none while static vNPUs split it (they are no devices of this driver)."""
    return [] if state.split else [device_name(state.phy_id)]


class DeviceHealthService(DraResourceHealthBase):
    """``NodeWatchResources``: every device's health, after every change and every heartbeat (the
    kubelet counts an older report as Unknown); the stream ends only when the plugin stops."""

    def __init__(
        self,
        inventory: Inventory,
        pool: str,
        heartbeat: float = HEARTBEAT,
        clock: Callable[[], float] = time.time,
        devices_of: Callable[[ChipState], list[str]] = _whole,
    ) -> None:
        """``devices_of``: the devices a chip stands behind."""
        self.inventory = inventory
        self.pool = pool
        self.devices_of = devices_of
        self.heartbeat = heartbeat
        self.clock = clock
        self.streams = OpenStreams()

    def snapshot(self) -> NodeWatchResourcesResponse:
        now = int(self.clock())
        return NodeWatchResourcesResponse(
            devices=[
                DeviceHealth(
                    device=DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=_status(state),
                    last_updated_time=now,
                    health_check_timeout_seconds=REPORT_TIMEOUT,
                    message=state.reason[:MAX_MESSAGE],
                )
                for state in self.inventory.chips()
                for name in self.devices_of(state)
            ]
        )

    async def node_watch_resources(
        self, message: NodeWatchResourcesRequest
    ) -> AsyncIterator[NodeWatchResourcesResponse]:
        with self.streams.open() as sight:
            while not self.streams.stopping:
                changed = self.streams.next_change()
                version = self.inventory.version
                yield self.snapshot()
                sight.showed(version)
                with anyio.move_on_after(self.heartbeat):
                    await changed.wait()
