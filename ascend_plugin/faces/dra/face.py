"""DraFace: the DRA driver of this node, as one part of the plugin.

Start-up: the checkpoint is read (and every prepared claim's CDI spec put back
if it went), the DRA socket serves the DRA services and the health stream,
the registration socket serves the plugin watcher, and then, side by side:

* the sockets are kept in place (re-created if someone deletes one);
* the health stream hears of every change of the chips;
* the API client is made and the ResourceSlices are published and kept.

Nothing the kubelet calls waits for the API server except the first Prepare
of a claim, which has to read it: the sockets are served before the client
exists, Unprepare and a repeated Prepare are answered from the checkpoint.

Shutdown: the health streams end, the registration socket goes (the plugin
watcher deregisters the driver), then the DRA socket. The slices stay: a
restarted plugin adopts them, and the kubelet removes them itself if the
driver stays away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ascend_plugin.faces.dra.checkpoint import Checkpoint
from ascend_plugin.faces.dra.claim_specs import ClaimSpecs
from ascend_plugin.faces.dra.claims import ClaimRef, ClaimRefused
from ascend_plugin.faces.dra.devices import DeviceCatalog
from ascend_plugin.faces.dra.health import DeviceHealthService
from ascend_plugin.faces.dra.names import CHECKPOINT, DRA_SOCKET, registration_socket
from ascend_plugin.faces.dra.prepare import ClaimPreparer
from ascend_plugin.faces.dra.registration import RegistrationService
from ascend_plugin.faces.dra.request_shapes import dra_rules, registration_rules
from ascend_plugin.faces.dra.service import DraPluginV1, DraPluginV1beta1
from ascend_plugin.faces.dra.slices import SliceController
from ascend_plugin.grpc_guard.server import GuardedEndpoint
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import RESOURCE_CLAIMS, Kube
from ascend_plugin.kubeapi.errors import KubeError, NotFound
from ascend_plugin.kubeapi.retry import connect_retrying
from ascend_plugin.resilience import supervise
from ascend_plugin.settings import Settings, dra_plugin_dir

log = logging.getLogger(__name__)

STREAM_END_WAIT = 2.0  # seconds to let the kubelet see the health streams end before the socket goes


@dataclass(frozen=True)
class DraSettings:
    """What the DRA face needs of the settings."""

    driver: str
    node: str
    registry_dir: Path
    plugin_dir: Path
    cdi_kind: str
    cdi_spec_dir: Path
    device_taints: bool = False
    kubeconfig: Path | None = None
    watch_interval: float = 0.1  # seconds between checks that the sockets are in place
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
            kubeconfig=settings.kubeconfig,
            watch_interval=settings.kubelet_watch_interval,
            host_root=settings.host_root,
        )


class ApiClaims:
    """ResourceClaims read from the API server, once the client exists."""

    def __init__(self) -> None:
        self.kube: Kube | None = None

    async def claim(self, ref: ClaimRef) -> Mapping[str, object]:
        if self.kube is None:
            raise ClaimRefused(
                f"cannot read ResourceClaim {ref}: the API client is not set up yet (see the plugin's log); "
                "the kubelet retries",
                "api",
            )
        try:
            return await self.kube.get(RESOURCE_CLAIMS, ref.name, ref.namespace)
        except NotFound:
            raise ClaimRefused(f"ResourceClaim {ref} does not exist (any more)", "claim") from None
        except KubeError as error:
            raise ClaimRefused(
                f"cannot read ResourceClaim {ref}: {error}; the kubelet retries", "api"
            ) from None


class DraFace:
    """The registration and DRA sockets, the preparer, the health stream and the ResourceSlices."""

    def __init__(self, inventory: Inventory, host: HostDevices, settings: DraSettings) -> None:
        self.inventory = inventory
        self.settings = settings
        self.catalog = DeviceCatalog(inventory, settings.driver, settings.host_root)
        self.claims = ApiClaims()
        self.preparer = ClaimPreparer(
            driver=settings.driver,
            pool=settings.node,
            inventory=inventory,
            specs=ClaimSpecs(settings.cdi_kind, settings.cdi_spec_dir, host),
            checkpoint=Checkpoint(settings.plugin_dir / CHECKPOINT),
            source=self.claims,
        )
        service = DraPluginV1(self.preparer)
        self.health = DeviceHealthService(inventory, settings.node)
        self.dra_endpoint = GuardedEndpoint(
            [service, DraPluginV1beta1(service), self.health],
            settings.plugin_dir / DRA_SOCKET,
            "the DRA driver API",
            dra_rules(settings.registry_dir),
        )
        self.registration = RegistrationService(settings.driver, self.dra_endpoint.path)
        self.registration_endpoint = GuardedEndpoint(
            [self.registration],
            settings.registry_dir / registration_socket(settings.driver),
            "the DRA driver's registration",
            registration_rules(settings.registry_dir),
        )
        self.slices: SliceController | None = None
        self._stopping = False

    @property
    def registered(self) -> bool:
        """The kubelet confirmed the registration (and has not refused a later one)."""
        return self.registration.registered

    @property
    def last_error(self) -> str:
        """The kubelet's reason for its last refusal, if any."""
        return self.registration.last_error

    def on_registered(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every registration the kubelet confirms."""
        self.registration.on_registered(listener)

    async def shown(self, version: int) -> None:
        """Return once the kubelet's health streams and the ResourceSlices show inventory ``version``.

        A hot reset waits here after taking its chips out. The slices wait for
        the API server, and the caller bounds the wait; before the client exists
        nothing is published, and the first slices show the chips as they are then.
        """
        await self.health.streams.shown(version)
        if self.slices is not None:
            await self.slices.published(version)

    async def run(self) -> None:
        """Serve until the inventory closes, then stop."""
        try:
            await self.preparer.restore()
            await self.dra_endpoint.start()
            await self.registration_endpoint.start()
            async with anyio.create_task_group() as group:
                group.start_soon(supervise, "DRA sockets", self._keep_sockets)
                group.start_soon(supervise, "DRA health stream", self._follow_chips)
                group.start_soon(supervise, "ResourceSlices", self._publish)
                version = -1
                while not self.inventory.closed:
                    version = await self.inventory.wait_for_change(version)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.stop()

    async def _keep_sockets(self) -> None:
        """Put back a socket someone deleted (the kubelet finds the registration socket again by itself)."""
        while not self._stopping:
            for endpoint in (self.dra_endpoint, self.registration_endpoint):
                if not endpoint.serving and not self._stopping:
                    log.warning("%s was removed; serving it again", endpoint.path)
                    await endpoint.start()
            await anyio.sleep(self.settings.watch_interval)

    async def _follow_chips(self) -> None:
        version = self.inventory.version
        while not self.inventory.closed:
            version = await self.inventory.wait_for_change(version)
            self.health.notify()

    async def _publish(self) -> None:
        kube = await connect_retrying(self.settings.kubeconfig, "DRA driver: Kubernetes client")
        self.claims.kube = kube
        try:
            self.slices = SliceController(
                kube, self.catalog, self.settings.node, taints=self.settings.device_taints
            )
            await self.slices.run()
        finally:
            self.claims.kube = None
            with anyio.CancelScope(shield=True):
                await kube.close()

    async def stop(self) -> None:
        """End the health streams, then close the registration socket and the DRA socket."""
        self._stopping = True
        self.health.stop()
        with anyio.move_on_after(STREAM_END_WAIT):
            await self.health.streams_ended()
        await self.registration_endpoint.stop()
        await self.dra_endpoint.stop()
