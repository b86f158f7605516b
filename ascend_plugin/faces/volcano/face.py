"""VolcanoFace: Volcano mode's parts, wired, and the way they run.

The chooser exists from the start, so the device-plugin face can be given it
before it registers. Running, the face reads the node's InternalIP for the rank
table, then runs the pod cache, the patcher and the annotation writer, each supervised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faces.volcano.annotations import AnnotationWriter, DeviceIps
from ascend_plugin.faces.volcano.chooser import VolcanoChooser
from ascend_plugin.faces.volcano.pod_cache import PodCache, PodPatcher
from ascend_plugin.holdings.held import Assignments, HeldChips
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import NODES, Kube, mapping_field, string_field
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.kubeapi.shared import SharedClient
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.resilience import supervise
from ascend_plugin.settings import Settings
from backends.backend import ChipBackend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VolcanoSettings:
    """What Volcano mode needs of the settings."""

    node_name: str
    host_ip: str  # the downward API's status.hostIP: the rank table's host_ip if the Node says none

    @classmethod
    def from_settings(cls, settings: Settings) -> VolcanoSettings:
        assert settings.node_name is not None  # Settings refuses volcano without it
        return cls(settings.node_name, settings.host_ip or "")


class VolcanoFace:
    """The chooser, the pod cache, the patcher and the annotation writer of one node."""

    def __init__(
        self,
        settings: VolcanoSettings,
        book: OfferBook,
        inventory: Inventory,
        *,
        calls: ChipCalls,
        backend: ChipBackend,
        held: HeldChips,
        client: SharedClient,
    ) -> None:
        """``calls``, ``backend``: to read the device IPs of the rank table; ``client``: the process's API
        client."""
        self.settings = settings
        self.client = client
        self.resource = inventory.table.resource_name
        self.pods = PodCache(settings.node_name)
        self.patcher = PodPatcher()
        self.held = held
        self.chooser = VolcanoChooser(
            self.resource, book, self.pods, patcher=self.patcher, assignments=Assignments(), held=held
        )
        wanted = backend.has_rank_table([state.chip for state in inventory.chips()])
        device_ips = DeviceIps(calls, backend, inventory) if wanted else None
        self.writer = AnnotationWriter(self.chooser, device_ips=device_ips, host_ip=settings.host_ip)
        self.book = book

    async def run(self) -> None:
        """Connect, then follow the node's pods and keep their annotations until cancelled."""
        async with self.client.use("Volcano mode's Kubernetes client") as kube:
            self.writer.host_ip = await self._host_ip(kube)
            await self._check_allocatable()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(supervise, "volcano pod cache", lambda: self.pods.run(kube))
                tasks.start_soon(supervise, "volcano pod patches", lambda: self.patcher.run(kube))
                tasks.start_soon(supervise, "volcano annotations", self.writer.run)

    async def _host_ip(self, kube: Kube) -> str:
        """The node's InternalIP, else the downward API's host IP."""
        try:
            node = await kube.get(NODES, self.settings.node_name)
        except KubeError as error:
            log.warning(
                "cannot read node %s (%s): the rank table's host_ip is HOST_IP",
                self.settings.node_name,
                error,
            )
            return self.settings.host_ip
        addresses = mapping_field(node, "status").get("addresses")
        for address in addresses if isinstance(addresses, list) else []:
            if isinstance(address, dict) and string_field(address, "type") == "InternalIP":
                return string_field(address, "address")
        log.warning("node %s has no InternalIP: the rank table's host_ip is HOST_IP", self.settings.node_name)
        return self.settings.host_ip

    async def _check_allocatable(self) -> None:
        """Say so when the kubelet knows device IDs of the resource that this plugin does not offer."""
        allocatable = await self.held.client.allocatable()
        if allocatable is None:
            return
        offered = {device.id for device in self.book.devices(self.resource)}
        strangers = sorted(set(allocatable.get(self.resource, ())) - offered)
        if strangers:
            log.warning(
                "the kubelet lists %s device IDs this plugin does not offer: %s (left from another plugin?)",
                self.resource,
                ", ".join(strangers),
            )
