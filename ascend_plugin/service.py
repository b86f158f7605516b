"""The DevicePlugin gRPC service the kubelet calls on our socket."""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator, Callable

import anyio
from grpclib import GRPCError
from grpclib.const import Status

from ascend_plugin.allocation import AllocationRefused, Allocator, preferred_devices
from ascend_plugin.kubelet_api.v1beta1 import (
    AllocateRequest,
    AllocateResponse,
    ContainerPreferredAllocationResponse,
    Device,
    DevicePluginBase,
    DevicePluginOptions,
    Empty,
    ListAndWatchResponse,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    PreStartContainerResponse,
)
from ascend_plugin.registry import DeviceRegistry

log = logging.getLogger(__name__)

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

OPTIONS = DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


class DevicePluginService(DevicePluginBase):
    """ListAndWatch from the registry; Allocate through the allocator."""

    def __init__(self, registry: DeviceRegistry, allocator: Allocator) -> None:
        self.registry = registry
        self.allocator = allocator
        self.open_streams = 0
        self.updates_sent = 0
        self.allocations = 0
        self.allocation_errors: collections.Counter[str] = collections.Counter()
        self._no_streams = anyio.Event()
        self._no_streams.set()
        self._stream_closed_listeners: list[Callable[[], None]] = []

    def on_stream_closed(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a ListAndWatch stream ends before shutdown."""
        self._stream_closed_listeners.append(listener)

    def snapshot(self) -> ListAndWatchResponse:
        """Every device with its health, as the kubelet wants it."""
        return ListAndWatchResponse(
            devices=[
                Device(id=device.id, health=HEALTHY if device.healthy else UNHEALTHY)
                for device in self.registry.devices()
            ]
        )

    async def streams_ended(self) -> None:
        """Return once no ListAndWatch stream is open."""
        await self._no_streams.wait()

    async def get_device_plugin_options(self, message: Empty) -> DevicePluginOptions:
        return OPTIONS

    async def list_and_watch(self, message: Empty) -> AsyncIterator[ListAndWatchResponse]:
        """The full list now, then again after every change, until the plugin stops.

        Returning ends the kubelet's view of the resource, so this only returns
        once the registry is closed (shutdown).
        """
        self.open_streams += 1
        if self._no_streams.is_set():
            self._no_streams = anyio.Event()
        log.info("kubelet opened ListAndWatch", extra={"streams": self.open_streams})
        try:
            version = self.registry.version
            last: ListAndWatchResponse | None = None
            while not self.registry.closed:
                current = self.snapshot()
                # The registry also changes for things the kubelet never sees
                # (fault codes, reasons): send only what changes its view.
                if current != last:
                    yield current
                    self.updates_sent += 1
                    last = current
                version = await self.registry.wait_for_change(version)
        finally:
            self.open_streams -= 1
            if self.open_streams == 0:
                self._no_streams.set()
            if not self.registry.closed:
                log.warning(
                    "ListAndWatch stream dropped by the kubelet", extra={"streams": self.open_streams}
                )
                for listener in self._stream_closed_listeners:
                    listener()

    async def get_preferred_allocation(
        self, message: PreferredAllocationRequest
    ) -> PreferredAllocationResponse:
        return PreferredAllocationResponse(
            container_responses=[
                ContainerPreferredAllocationResponse(
                    device_i_ds=preferred_devices(
                        request.available_deviceIDs, request.must_include_deviceIDs, request.allocation_size
                    )
                )
                for request in message.container_requests
            ]
        )

    async def allocate(self, message: AllocateRequest) -> AllocateResponse:
        if not message.container_requests:
            raise GRPCError(Status.INVALID_ARGUMENT, "Allocate request has no container requests")
        try:
            checked = [self.allocator.check(request.devices_ids) for request in message.container_requests]
        except AllocationRefused as refused:
            self.allocation_errors[refused.kind] += 1
            log.warning("allocation refused: %s", refused.reason, extra={"reason": refused.reason})
            raise GRPCError(refused.status, refused.reason) from None
        response = AllocateResponse(
            container_responses=[self.allocator.container_response(devices) for devices in checked]
        )
        self.allocations += len(checked)
        for devices in checked:
            log.info(
                "allocated %s",
                ",".join(device.id for device in devices),
                extra={"devices": [device.id for device in devices], "mode": self.allocator.mode.value},
            )
        return response

    async def pre_start_container(self, message: PreStartContainerRequest) -> PreStartContainerResponse:
        return PreStartContainerResponse()
