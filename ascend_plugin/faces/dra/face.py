"""DraFace: the DRA driver of this node, as one part of the plugin.

A run reads the checkpoint, keeps the DRA and registration sockets in place, streams health and publishes
the ResourceSlices once the kubelet registered the driver; it closes what it served however it ends, so a
restarted run serves again. Nothing the kubelet calls waits for the API server but a claim's first Prepare.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.dir_watch import DirectoryChanges
from ascend_plugin.faces.dra.checkpoint import Checkpoint
from ascend_plugin.faces.dra.claim_specs import ClaimSpecs
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.names import CHECKPOINT, DRA_SOCKET, registration_socket
from ascend_plugin.faces.dra.prepare import ClaimPreparer
from ascend_plugin.faces.dra.request_shapes import DRA_SHAPES, REGISTRATION_SHAPES, kubelet_rules
from ascend_plugin.faces.dra.services import (
    DeviceHealthService,
    DraPluginV1,
    DraPluginV1beta1,
    RegistrationService,
)
from ascend_plugin.faces.dra.slices import SliceController
from ascend_plugin.faces.dra.vnpus import ChipVnpus, VnpuKeeper
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.grpc_guard.server import GuardedEndpoint
from ascend_plugin.grpc_sockets import EndpointStopped, SocketEndpoint
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.shared import SharedClient
from ascend_plugin.offers.node_offers import DraPlan
from ascend_plugin.path_facts import PathUnusable
from ascend_plugin.resilience import Backoff, Retrier, supervise
from ascend_plugin.settings import Settings, dra_plugin_dir

log = logging.getLogger(__name__)

STREAM_END_WAIT = 2.0  # seconds to let the kubelet see the health streams end before the socket goes
# Retrying a socket that cannot be created: soon at first (a directory mounted late), then every 10 s.
SOCKET_BACKOFF = Backoff(0.1, 10.0)


@dataclass(frozen=True)
class DraSettings:
    driver: str
    node: str
    registry_dir: Path
    plugin_dir: Path
    cdi_kind: str
    cdi_spec_dir: Path
    device_taints: bool | None = None  # None: wherever the API server keeps them
    evict: bool = True  # NoExecute taints for the levels that must stop work
    kubeconfig: Path | None = None
    watch_interval: float = 0.1  # seconds between checks that the sockets are in place, without inotify
    host_root: Path = Path("/")

    @classmethod
    def from_settings(cls, settings: Settings) -> DraSettings:
        assert settings.node_name  # Settings refuse serve=dra without it
        return cls(
            driver=settings.dra_driver_name,
            node=settings.node_name,
            registry_dir=settings.dra_registry_path,
            plugin_dir=dra_plugin_dir(settings),
            cdi_kind=settings.cdi_kind,
            cdi_spec_dir=settings.cdi_spec_dir,
            device_taints=settings.dra_device_taints,
            evict=settings.dra_taint_effect == "by-level",
            kubeconfig=settings.kubeconfig,
            watch_interval=settings.kubelet_watch_interval,
            host_root=settings.host_root,
        )


class RunSockets:
    """One run's sockets and health stream: made when a run starts, closed for good when it ends."""

    def __init__(self, face: DraFace) -> None:
        self.health = DeviceHealthService(
            face.inventory, face.settings.node, devices_of=face.catalog.names_of
        )
        registry = face.settings.registry_dir
        self.dra = GuardedEndpoint(
            [face.service, DraPluginV1beta1(face.service), self.health],
            face.dra_socket,
            "the DRA driver API",
            kubelet_rules(DRA_SHAPES, registry),
        )
        self.registration = GuardedEndpoint(
            [face.registration],
            face.registration_socket,
            "the DRA driver's registration",
            kubelet_rules(REGISTRATION_SHAPES, registry),
        )
        self.started: set[SocketEndpoint] = set()

    @property
    def endpoints(self) -> tuple[SocketEndpoint, SocketEndpoint]:
        """The DRA socket first: the kubelet dials it as soon as the registration socket answers."""
        return self.dra, self.registration

    @property
    def serving(self) -> bool:
        return all(endpoint.serving for endpoint in self.endpoints)


class DraFace:
    """The registration and DRA sockets, the preparer, the health stream and the ResourceSlices."""

    def __init__(
        self,
        inventory: Inventory,
        host: HostDevices,
        settings: DraSettings,
        plan: DraPlan,
        calls: ChipCalls,
        *,
        held: HeldChips | None = None,
        client: SharedClient,
    ) -> None:
        """``plan``: the chips split on demand, and shared; ``calls``: the chip lanes its vNPUs are made on;
        ``held``: which chips pods hold; ``client``: the process's API client."""
        self.inventory = inventory
        self.held = held
        self.settings = settings
        self.client = client
        self.catalog = DeviceCatalog(
            inventory,
            settings.driver,
            settings.host_root,
            splits=plan.splits,
            share_count=plan.share_count,
            evict=settings.evict,
        )
        keeper = None
        if plan.maker is not None and plan.splits:
            keeper = VnpuKeeper(ChipVnpus(plan.maker, calls, inventory), plan.splits.keys())
        self.keeper = keeper
        self.preparer = ClaimPreparer(
            driver=settings.driver,
            pool=settings.node,
            catalog=self.catalog,
            specs=ClaimSpecs(settings.cdi_kind, settings.cdi_spec_dir, host),
            checkpoint=Checkpoint(settings.plugin_dir / CHECKPOINT),
            keeper=keeper,
            held=held,
        )
        self.service = DraPluginV1(self.preparer)
        self.dra_socket = settings.plugin_dir / DRA_SOCKET
        self.registration_socket = settings.registry_dir / registration_socket(settings.driver)
        self.registration = RegistrationService(settings.driver, self.dra_socket)
        self.sockets: RunSockets | None = None  # the current run's
        # Why a socket cannot be served, while that lasts (its problem), and the backoff.
        self.socket_retry = Retrier("DRA driver's sockets", SOCKET_BACKOFF, logger=log)
        # Someone deleting a socket wakes the keeper (inotify); it also looks on a timer without it.
        directories = [settings.plugin_dir, settings.registry_dir]
        self._changes = DirectoryChanges(directories, settings.watch_interval)
        self.slices: SliceController | None = None

    @property
    def notes(self) -> list[str]:
        """Why the published pool lacks something the settings ask for (what the API server drops)."""
        return self.slices.notes if self.slices is not None else []

    def on_registered(self, listener: Callable[[], None]) -> None:
        self.registration.on_registered(listener)

    def counters(self) -> KubeletCounters:
        claims = self.preparer.stats
        return KubeletCounters(
            registrations=self.registration.registrations,
            claims_prepared=claims.prepared,
            claims_unprepared=claims.unprepared,
            prepare_errors=dict(claims.errors),
        )

    async def shown(self, version: int) -> None:
        """Return once the health streams and the ResourceSlices show inventory ``version`` (a hot reset
        waits here, bounded by its caller); before the client exists nothing is published to wait for."""
        if self.sockets is not None:
            await self.sockets.health.streams.shown(version)
        if self.slices is not None:
            await self.slices.published(version)

    def problems(self) -> list[str]:
        """What keeps the driver from serving the node now, one line per cause; empty while it does."""
        found = []
        if self.socket_retry.problem:
            found.append(self.socket_retry.problem)
        elif self.sockets is None or not self.sockets.serving:
            found.append("its sockets are not served yet")
        elif not self.registration.registered:
            found.append(
                f"not registered with the kubelet: {self.registration.last_error or 'waiting for it'}"
            )
        if self.slices is None:
            found.append("ResourceSlices not published yet: the API client is not set up (see the log)")
        elif not self.slices.in_sync:
            found.append(f"ResourceSlices of pool {self.settings.node} not up to date: {self.slices.problem}")
        return found

    async def run(self) -> None:
        """Serve until the inventory closes; whatever ends the run, what it served is closed."""
        sockets = self.sockets = RunSockets(self)
        try:
            await self.preparer.restore()  # before any socket: the kubelet may unprepare at once
            async with anyio.create_task_group() as group:
                group.start_soon(supervise, "DRA sockets", lambda: self._keep_sockets(sockets))
                group.start_soon(supervise, "DRA health stream", lambda: self._follow_chips(sockets))
                group.start_soon(supervise, "ResourceSlices", self._publish)
                version = -1
                while not self.inventory.closed:
                    version = await self.inventory.wait_for_change(version)
                    await self.preparer.sweep_strays()  # a vNPU a timed-out create left, seen by a poll
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._close(sockets)

    async def _keep_sockets(self, sockets: RunSockets) -> None:
        """Serve both sockets and put back one someone deleted (woken by a change in their directories); one
        that cannot be created is said once, kept for /readyz and retried with backoff."""
        self._changes.start()
        try:
            while True:
                try:
                    for endpoint in sockets.endpoints:
                        if not endpoint.serving:
                            if endpoint in sockets.started:  # said once, however long re-creating it takes
                                sockets.started.discard(endpoint)
                                log.warning("%s was removed; serving it again", endpoint.path)
                            await endpoint.start()
                            sockets.started.add(endpoint)
                except EndpointStopped:
                    return  # shutdown closed it meanwhile
                except PathUnusable as error:
                    await self.socket_retry.wait_after(str(error), error=str(error))
                    continue
                if attempts := self.socket_retry.succeeded():
                    log.info("the DRA driver's sockets are served again after %d failed attempt(s)", attempts)
                await self._changes.wait(self._changes.look_every)
        finally:
            self._changes.close()

    async def _follow_chips(self, sockets: RunSockets) -> None:
        version = self.inventory.version
        while not self.inventory.closed:
            version = await self.inventory.wait_for_change(version)
            sockets.health.streams.changed()

    async def _publish(self) -> None:
        """Publish and keep the pool once the kubelet has registered the driver: a device the kubelet cannot
        prepare yet ("not registered") costs a pod the kubelet's backoff, a minute and more."""
        async with self.client.use("DRA driver: Kubernetes client") as kube:
            self.preparer.kube = kube
            try:
                self.slices = SliceController(
                    kube, self.catalog, self.settings.node, taints=self.settings.device_taints, held=self.held
                )
                if not self.registration.registered:
                    log.info("the ResourceSlices wait for the kubelet to register the driver")
                    await self.registration.wait_registered()
                await self.slices.run()
            finally:
                self.preparer.kube = None

    async def _close(self, sockets: RunSockets) -> None:
        """End the health streams, then close the registration socket and the DRA socket."""
        sockets.health.streams.stop()
        with anyio.move_on_after(STREAM_END_WAIT):
            await sockets.health.streams.ended()
        await sockets.registration.stop()
        self.registration.forget()
        await sockets.dra.stop()
