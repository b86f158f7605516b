"""The DevicePlugin gRPC service of one resource: what the kubelet calls on that resource's socket.

Allocate checks every device ID first (a restart, a stale checkpoint or a hand-made request can send
anything). Where a chooser decides (Volcano mode), Allocate hands over the devices it names; a refusal
fails the pod's admission. Every refusal is counted by its label and logged here.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from ascend_plugin.faces.deviceplugin.request_shapes import REQUEST_SHAPES, request_limits
from ascend_plugin.grpc_guard.refusals import BadRequest, CannotServe, Refused
from ascend_plugin.grpc_guard.server import RequestRules
from ascend_plugin.grpc_guard.status import listed
from ascend_plugin.grpc_guard.wire_check import RequestLimits
from ascend_plugin.handover.modes import ContainerGrant, Handover
from ascend_plugin.holdings.held import DeviceChooser, HeldChips
from ascend_plugin.kubelet_api import v1beta1 as api
from ascend_plugin.naming import MAX_DEVICE_ID_LENGTH
from ascend_plugin.offers.base import OfferedDevice
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.offers.placement import DevicePlace, NodeTopology, numa_ids
from ascend_plugin.streams import OpenStreams
from backends.topology import TopologyUnit, UnitKind

log = logging.getLogger(__name__)

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


@dataclass
class ServiceStats:
    """Counters every resource's service adds to, for the metrics."""

    allocations: int = 0
    allocation_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    updates_sent: int = 0


class DevicePluginService(api.DevicePluginBase):
    """ListAndWatch from the offer book; Allocate through the handover mode."""

    def __init__(
        self,
        resource: str,
        book: OfferBook,
        handover: Handover,
        stats: ServiceStats,
        *,
        preferred_allocation: bool = True,
        chooser: DeviceChooser | None = None,
        held: HeldChips | None = None,
    ) -> None:
        self.resource = resource
        self.held = held  # told of what Allocate hands over: a hot reset must not take it meanwhile
        self.book = book
        self.handover = handover
        self.stats = stats
        # The chooser of this resource's devices, if the kubelet does not choose them.
        self.chooser = chooser if chooser is not None and chooser.decides(resource) else None
        self.options = api.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=preferred_allocation
        )
        self._topology: tuple[int, NodeTopology] | None = None
        self.streams = OpenStreams()
        self.on_stream_closed: Callable[[], None] = lambda: None  # a stream ended before shutdown

    def snapshot(self) -> api.ListAndWatchResponse:
        """Every device of the resource with its health, as the kubelet wants it."""
        devices = self.book.devices(self.resource)
        if self.chooser is None:
            listed = [(device.id, device) for device in devices]
        else:
            listed = self.chooser.assignments.paired(self.resource, devices)
        return api.ListAndWatchResponse(
            devices=[
                api.Device(
                    id=kubelet_id,
                    health=HEALTHY if device.healthy else UNHEALTHY,
                    topology=_topology_info(device.numa_node),
                )
                for kubelet_id, device in listed
            ]
        )

    def request_rules(self) -> RequestRules:
        """What this service's socket accepts (:mod:`.request_shapes`), bounded by the devices now."""

        def limits() -> RequestLimits:
            devices = len(self.book.devices(self.resource))
            return request_limits(self.resource, devices, len(self.book.inventory.chips()))

        return RequestRules(REQUEST_SHAPES, limits)

    async def get_device_plugin_options(self, message: api.Empty) -> api.DevicePluginOptions:
        return self.options

    async def list_and_watch(self, message: api.Empty) -> AsyncIterator[api.ListAndWatchResponse]:
        """The full list now, then after every change; it returns only when the resource stops (returning
        ends the kubelet's view of it)."""
        try:
            with self.streams.open() as sight:
                log.info(
                    "kubelet opened ListAndWatch",
                    extra={"resource": self.resource, "streams": self.streams.count},
                )
                last: api.ListAndWatchResponse | None = None
                while not self.streams.stopping:
                    changed = self.streams.next_change()
                    version = self.book.version
                    current = self.snapshot()
                    # The offers also change for things the kubelet never sees (fault
                    # codes, reasons): send only what changes its view.
                    if current != last:
                        yield current
                        self.stats.updates_sent += 1
                        last = current
                    sight.showed(version)
                    await changed.wait()
        finally:
            if not self.streams.stopping:
                log.warning(
                    "ListAndWatch stream dropped by the kubelet",
                    extra={"resource": self.resource, "streams": self.streams.count},
                )
                self.on_stream_closed()

    async def get_preferred_allocation(
        self, message: api.PreferredAllocationRequest
    ) -> api.PreferredAllocationResponse:
        topology = self.topology()
        return api.PreferredAllocationResponse(
            container_responses=[
                api.ContainerPreferredAllocationResponse(
                    device_i_ds=topology.preferred(
                        request.available_deviceIDs, request.must_include_deviceIDs, request.allocation_size
                    )
                )
                for request in message.container_requests
            ]
        )

    def topology(self) -> NodeTopology:
        """The resource's devices as placement sees them, rebuilt only when the offers changed."""
        version = self.book.version
        if self._topology is None or self._topology[0] != version:
            places = [_place(device) for device in self.book.devices(self.resource)]
            self._topology = (version, NodeTopology(places))
        return self._topology[1]

    async def allocate(self, message: api.AllocateRequest) -> api.AllocateResponse:
        if not message.container_requests:
            raise BadRequest("empty", "Allocate request has no container requests")
        try:
            checked = [await self._devices_for(request.devices_ids) for request in message.container_requests]
        except Refused as refused:
            self.stats.allocation_errors[refused.label] += 1
            log.warning("allocation refused: %s", refused.reason, extra=refused.fields())
            raise
        response = api.AllocateResponse(
            container_responses=[_response(self.handover.grant(devices)) for devices in checked]
        )
        self.stats.allocations += len(checked)
        if self.held is not None:
            self.held.handed(chip for devices in checked for device in devices for chip in device.chips)
        for devices in checked:
            log.info(
                "allocated %s",
                ",".join(device.id for device in devices),
                extra={"devices": [device.id for device in devices], "mode": self.handover.mode.value},
            )
        return response

    async def _devices_for(self, device_ids: list[str]) -> list[OfferedDevice]:
        """What one container gets: the kubelet's devices, or the real ones the chooser names for them;
        each offered and healthy, else CannotServe."""
        devices = known_devices(self.book, self.resource, device_ids)
        if self.chooser is None:
            for device in devices:
                _check_healthy(device, f"device {device.id}")
            return devices
        real_ids = await self.chooser.choose(self.resource, device_ids)
        devices = []
        for real_id in real_ids:
            chosen = self.book.get(self.resource, real_id)
            if chosen is None:
                raise CannotServe(
                    "chosen-unknown",
                    f"the scheduler chose {real_id!r}, which this node does not offer as {self.resource}; "
                    f"known devices: {_ids(self.book.devices(self.resource))}",
                )
            _check_healthy(chosen, f"the scheduler chose {real_id}, but it")
            devices.append(chosen)
        log.info(
            "kubelet IDs %s stand for %s",
            ",".join(device_ids),
            ",".join(real_ids),
            extra={"kubelet_ids": device_ids, "devices": list(real_ids)},
        )
        return devices

    async def pre_start_container(
        self, message: api.PreStartContainerRequest
    ) -> api.PreStartContainerResponse:
        return api.PreStartContainerResponse()


def _response(grant: ContainerGrant) -> api.ContainerAllocateResponse:
    return api.ContainerAllocateResponse(
        envs=dict(grant.envs),
        devices=[
            api.DeviceSpec(
                container_path=node.container_path, host_path=node.host_path, permissions=node.permissions
            )
            for node in grant.devices
        ],
        mounts=[
            api.Mount(
                container_path=mount.container_path, host_path=mount.host_path, read_only=mount.read_only
            )
            for mount in grant.mounts
        ],
        cdi_devices=[api.CdiDevice(name=name) for name in grant.cdi_devices],
        annotations=dict(grant.annotations),
    )


def _place(device: OfferedDevice) -> DevicePlace:
    """Where a device sits; a device without a known unit is a unit of its own (no preference)."""
    phy = device.chips[0]
    unit = device.unit or TopologyUnit(UnitKind.CARD, phy, 1)
    return DevicePlace(device.id, phy, unit, device.numa_node)


def _topology_info(numa_node: int | None) -> api.TopologyInfo | None:
    """The NUMA node the Topology Manager aligns with; none when unknown (no preference)."""
    nodes = numa_ids(numa_node)
    return api.TopologyInfo(nodes=[api.NumaNode(id=node) for node in nodes]) if nodes else None


def known_devices(book: OfferBook, resource: str, device_ids: Sequence[str]) -> list[OfferedDevice]:
    """The devices named, healthy or not (a chooser's kubelet IDs only count); BadRequest names the first bad
    ID."""
    if not device_ids:
        raise BadRequest("empty", "the request names no device IDs")
    offered = book.devices(resource)
    forms = list(dict.fromkeys(device.form for device in offered))
    seen: set[str] = set()
    devices = []
    for device_id in device_ids:
        if len(device_id) > MAX_DEVICE_ID_LENGTH or not any(form.pattern.match(device_id) for form in forms):
            expected = " or ".join(f"'{form}'" for form in forms) or "no device (none is offered)"
            raise BadRequest(
                "malformed", f"device ID {device_id[:80]!r} is malformed; expected {expected} for {resource}"
            )
        if device_id in seen:
            raise BadRequest("duplicate", f"device ID {device_id!r} appears twice")
        seen.add(device_id)
        device = book.get(resource, device_id)
        if device is None:
            raise BadRequest(
                "unknown", f"device ID {device_id!r} is not on this node; known devices: {_ids(offered)}"
            )
        devices.append(device)
    virtual = [device.id for device in devices if device.virtual]
    if len(virtual) > 1:
        raise BadRequest(
            "vnpus",
            f"the request names {len(virtual)} vNPUs ({listed(virtual)}); a container can hold one "
            "vNPU only (the Ascend runtime mounts one virtual device per container): request 1 of "
            f"{resource}",
        )
    return devices


def _ids(devices: Sequence[OfferedDevice]) -> str:
    """The devices' IDs for a refusal: the first ten and how many more (a node may offer hundreds)."""
    return listed([device.id for device in devices])


def _check_healthy(device: OfferedDevice, subject: str) -> None:
    if not device.healthy:
        raise CannotServe("unhealthy", f"{subject} is unhealthy: {device.reason}")
