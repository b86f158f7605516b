"""PluginApp: wiring only. It builds each part with exactly what it needs and runs them.

Start-up: discovery finds the chips (retrying until they appear, never
exiting), the health monitor looks at every chip once, and then the parts run
side by side as named, supervised root tasks: the health monitor, the
device-plugin face (one server and registrar per offered resource), the CDI
spec in cdi mode, and the Kubernetes publishers once the kubelet has its
devices. With ``serve: dra`` the DRA driver face runs instead of the
device-plugin face (never both: the scheduler would count every chip twice).
A part that fails is logged and restarted with backoff; nothing a chip
library raises can end the process. The one exception is settings that cannot
work with the chips found (sharing chips that carry vNPUs): the plugin then
stops with :data:`EXIT_REFUSED`, as it would for invalid settings.

Shutdown: end every ListAndWatch stream, close the servers, remove the sockets,
release the library.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from ascend_plugin.chip_calls import ChipCallError, ChipCalls, StuckCall
from ascend_plugin.faces.deviceplugin.face import DevicePluginFace, FaceSettings
from ascend_plugin.faces.operations.http_endpoint import HttpEndpoint, Probe, Routes
from ascend_plugin.faces.operations.metrics import PluginMetrics
from ascend_plugin.faces.operations.metrics_source import ChipMetric, KubeletCounters
from ascend_plugin.faces.operations.probes import LIMITS, PluginProbes, ProbeLimits
from ascend_plugin.faces.operations.telemetry_view import TelemetryView
from ascend_plugin.faults import load_table
from ascend_plugin.handover.cdi import CdiSpec
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.handover.modes import MODES, HandoverContext, HandoverMode, resolve_mode
from ascend_plugin.holdings.holdings import PodHoldings
from ascend_plugin.holdings.pod_resources import PodResourcesClient
from ascend_plugin.holdings.resolve import ChipResolver, ClaimNames
from ascend_plugin.instance_lock import InstanceLock
from ascend_plugin.inventory.discovery import Discovery, DiscoverySettings, Node
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.inventory.monitor import HealthMonitor, health_policy
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.offers.assignments import Assignments, DeviceChooser, HeldChips
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.offers.node_offers import Notice, OfferSettings, SharingRefused, plan_offers
from ascend_plugin.resilience import RootTask, Supervision, run_root_tasks
from ascend_plugin.settings import Settings, served_directory
from ascend_plugin.telemetry.collector import TelemetryCollector, TelemetryPolicy
from backends.errors import ChipError

if TYPE_CHECKING:  # the DRA face imports kubernetes-asyncio: loaded only with serve=dra
    from ascend_plugin.faces.dra.face import DraFace

log = logging.getLogger(__name__)

# The exit code when the settings cannot work with the chips found: the same as for invalid settings.
EXIT_REFUSED = 2
# The root tasks the kubelet is served through: readiness needs the one the settings choose running.
DEVICE_PLUGIN_PART = "device plugin"
DRA_PART = "DRA driver"


class PluginApp:
    """One plugin process's parts, wired together."""

    def __init__(
        self,
        settings: Settings,
        *,
        freeze_heap: bool = False,
        supervision: Supervision | None = None,
        limits: ProbeLimits = LIMITS,
    ) -> None:
        """``freeze_heap``: keep the garbage collector off what start-up built (the daemon does; a
        process that runs many apps, like the tests, must not, or each would pin the garbage before it).
        ``supervision`` and ``limits``: when a failing part counts as serving again, and as dead.
        """
        self.settings = settings
        self.freeze_heap = freeze_heap
        self.config = LiveConfig(settings, load_table(settings.fault_levels_file))
        self.calls = ChipCalls(settings.dcmi_call_timeout)
        self.discovery = Discovery(DiscoverySettings.from_settings(settings), self.calls)
        self.lock = InstanceLock(served_directory(settings))
        self.supervision = supervision or Supervision()
        self.probes = PluginProbes(
            lock=self.lock,
            discovery=self.discovery,
            calls=self.calls,
            supervision=self.supervision,
            kubelet_part=DRA_PART if settings.serve == "dra" else DEVICE_PLUGIN_PART,
            limits=limits,
        )
        self.monitor: HealthMonitor | None = None
        self.book: OfferBook | None = None
        self.face: DevicePluginFace | None = None
        self.dra: DraFace | None = None
        # Which container holds which chips (the kubelet's PodResources), and the chips held, in every mode.
        self.held = HeldChips()
        self.holdings: PodHoldings | None = None
        self.telemetry: TelemetryCollector | None = None  # the chips' telemetry, unless turned off
        # Volcano mode: the kubelet-ID map, shared by the faces.
        self.assignments: Assignments | None = None
        self.volcano: RootTask | None = None
        self.http: HttpEndpoint | None = None
        self.stop_requested = anyio.Event()
        self.registered_once = anyio.Event()
        self.exit_code = 0  # EXIT_REFUSED once the settings were refused for the chips found
        self.metrics = PluginMetrics(_MetricsView(self))
        self.calls.on_call_done(self.metrics.observe_call)
        self.config.on_change(self._config_changed)

    @property
    def node(self) -> Node | None:
        """The node's chips and the backend they are reached through, once discovery found them."""
        return self.discovery.node

    @property
    def inventory(self) -> Inventory | None:
        """The node's chips, once discovery found them."""
        return self.node.inventory if self.node is not None else None

    # -- probes (decided in faces.operations.probes) ---------------------------------------

    @property
    def ready(self) -> bool:
        """The node is served: what /readyz says."""
        return self.readiness().ok

    def liveness(self) -> Probe:
        """Alive unless only a restart can help (/healthz)."""
        return self.probes.liveness()

    def readiness(self) -> Probe:
        """Ready when the node is served; otherwise every cause (/readyz)."""
        return self.probes.readiness()

    # -- running -------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly."""
        self.stop_requested.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; returns after a clean shutdown."""
        tasks = [RootTask("plugin", self._serve)]
        if self.settings.http_address:
            routes = Routes(self.liveness, self.readiness, self.metrics.render)
            self.http = HttpEndpoint(self.settings.http_address, routes)
            tasks.append(RootTask("operations endpoint", self.http.serve_forever))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(run_root_tasks, tasks, self.supervision)
                await self.stop_requested.wait()
                await self._shutdown()
                group.cancel_scope.cancel()
        finally:
            self.calls.shutdown()
            self.lock.release()  # after the sockets are gone: the next instance finds none of ours

    async def _serve(self) -> None:
        settings = self.settings
        node = await self.discovery.run()
        # Chips found while an old instance may still be serving; no socket is touched before the lock.
        await self.lock.acquire()
        inventory = node.inventory
        monitor = HealthMonitor(
            node.backend,
            self.calls,
            inventory,
            policy=lambda: health_policy(self.config.settings),
            fault_table=lambda: self.config.fault_table,
        )
        await monitor.poll_all()  # the kubelet's first list already carries real verdicts (and vNPUs)
        watched = [RootTask("health monitor", monitor.run)]
        if settings.telemetry:
            self.telemetry = TelemetryCollector(
                node.backend, self.calls, inventory, TelemetryPolicy.from_settings(settings)
            )
            watched.append(RootTask("telemetry", self.telemetry.run))
        host = HostDevices(inventory.table, settings.host_root)
        if settings.serve == "dra":  # whole chips through the DRA face; no offers, no device plugin
            self.monitor = monitor
            from ascend_plugin.faces.dra.names import phy_of

            assert settings.node_name  # Settings refuse serve=dra without it
            holdings = self._holdings(
                ChipResolver(claims=ClaimNames(settings.dra_driver_name, settings.node_name, phy_of))
            )
            await run_root_tasks(
                [*watched, RootTask("pod holdings", holdings.run), *self._dra_tasks(inventory, host)]
            )
            return
        try:
            plan = plan_offers(OfferSettings.from_settings(settings), inventory, node.backend)
        except SharingRefused as refused:
            log.error("refusing to start: %s", refused)
            self.exit_code = EXIT_REFUSED
            self.stop()
            return
        for notice in plan.notices:
            log.log(notice.level, "%s", notice.message, extra={"reason": notice.reason})
        book = OfferBook(inventory, plan.offers)
        mode = resolve_mode(settings.allocate_mode)
        cdi = CdiSpec(settings.cdi_kind, settings.cdi_spec_dir, host)
        handover = MODES[mode](HandoverContext(inventory.table, host, cdi))
        resolver = ChipResolver(book)
        holdings = self._holdings(resolver)
        chooser = self._volcano(node, book, holdings) if settings.volcano else None
        resolver.chooser = chooser
        face = DevicePluginFace(
            book,
            handover,
            FaceSettings(
                settings.device_plugin_path,
                inventory.table.resource_name,
                settings.socket_name,
                settings.kubelet_watch_interval,
                settings.preferred_allocation,
            ),
            chooser,
        )
        face.on_registered(self.registered_once.set)
        face.on_registered(self.lock.keep_note)
        self.monitor, self.book, self.face = monitor, book, face
        log.info(
            "serving %d %s chip(s) as %s in %s mode",
            len(inventory.chips()),
            inventory.table.family,
            ", ".join(book.resources()),
            mode.value,
            extra={
                "resources": {name: [d.id for d in devices] for name, devices in book.resources().items()}
            },
        )
        if self.freeze_heap:
            _freeze_the_heap()
        tasks = [
            *watched,
            RootTask(DEVICE_PLUGIN_PART, face.run, face.problems),
            RootTask("pod holdings", holdings.run),
        ]
        if mode is HandoverMode.CDI:
            tasks.append(RootTask("CDI spec", lambda: cdi.keep_written(book), cdi.problems))
        if self.volcano is not None:
            tasks.append(self.volcano)
        if settings.node_name:
            node_name, warnings = settings.node_name, plan.warnings
            tasks.append(RootTask("kubernetes", lambda: self._run_kube(node_name, inventory, warnings)))
        else:
            log.warning(
                "NODE_NAME is not set: node labels, the device-info ConfigMap, config reload and node events "
                "are off (the Helm chart sets NODE_NAME from the downward API)"
            )
        await run_root_tasks(tasks)

    def _dra_tasks(self, inventory: Inventory, host: HostDevices) -> list[RootTask]:
        """The DRA driver face, and the Kubernetes publishers once the kubelet registered it."""
        from ascend_plugin.faces.dra.face import DraFace, DraSettings

        dra_settings = DraSettings.from_settings(self.settings)
        dra = DraFace(inventory, host, dra_settings)
        dra.on_registered(self.registered_once.set)
        dra.on_registered(self.lock.keep_note)
        self.dra = dra
        log.info(
            "serving %d %s chip(s) as DRA driver %s, pool %s",
            len(inventory.chips()),
            inventory.table.family,
            dra_settings.driver,
            dra_settings.node,
            extra={"driver": dra_settings.driver, "pool": dra_settings.node},
        )
        return [
            RootTask(DRA_PART, dra.run, dra.problems),
            RootTask("kubernetes", lambda: self._run_kube(dra_settings.node, inventory, ())),
        ]

    async def _run_kube(self, node_name: str, inventory: Inventory, notices: tuple[Notice, ...]) -> None:
        """The Kubernetes side, started only after the first registration.

        kubernetes-asyncio costs tens of MB and most of a second to import, so it
        is never imported before the kubelet has its devices, nor at all when
        the kube features are off.
        """
        await self.registered_once.wait()
        from ascend_plugin.faces.kube.publishers import KubeInputs
        from ascend_plugin.faces.kube.run import run_kube

        if self.freeze_heap:
            _freeze_the_heap()  # and the Kubernetes client's, as large again
        # The free list leaves held chips out in Volcano mode only, as Huawei's: elsewhere Volcano
        # subtracts the pods it placed itself, and would count held chips twice.
        held = self.held if self.settings.volcano else None
        inputs = KubeInputs(self.settings, node_name, self.config, inventory, held=held, notices=notices)
        await run_kube(inputs)

    def _holdings(self, resolver: ChipResolver) -> PodHoldings:
        """Which container holds which chips, from the kubelet's PodResources API (every mode)."""
        self.holdings = PodHoldings(
            PodResourcesClient(self.settings.pod_resources_socket), resolver, self.held
        )
        return self.holdings

    def _volcano(self, node: Node, book: OfferBook, holdings: PodHoldings) -> DeviceChooser:
        """Volcano mode's face; its chooser decides the whole-chip resource's devices.

        Imported here, before the kubelet registration, and not after it like the
        Kubernetes publishers: without the pod cache there is no correct answer to
        Allocate, so its cost (kubernetes-asyncio) is paid at start.
        """
        from ascend_plugin.faces.volcano.face import ChipAccess, VolcanoFace, VolcanoSettings

        self.assignments = Assignments()
        volcano = VolcanoFace(
            VolcanoSettings.from_settings(self.settings),
            book,
            node.inventory,
            chips=ChipAccess(self.calls, node.backend),
            assignments=self.assignments,
            holdings=holdings,
        )
        self.volcano = RootTask("volcano", volcano.run)
        log.info("Volcano mode: %s chips are the ones Volcano chose", node.inventory.table.resource_name)
        return volcano.chooser

    def _config_changed(self, changed: list[str]) -> None:
        if "log_level" in changed:
            logging.getLogger().setLevel(self.config.settings.log_level)
        if self.monitor is not None:
            self.monitor.wake()

    async def _shutdown(self) -> None:
        if self.node is None:
            return
        self.node.inventory.close()
        if self.face is not None:
            await self.face.stop()
        if self.dra is not None:
            await self.dra.stop()
        if not await self.calls.drain_chip_lanes():
            log.warning(
                "a driver call still hangs: the chip library is left loaded (unloading it would crash)"
            )
        else:
            try:
                await self.calls.node("close", self.node.backend.close)
            except (ChipError, ChipCallError) as error:
                log.warning("closing the chip library failed: %s", error)
        log.info("stopped")


def _freeze_the_heap() -> None:
    """Keep the cyclic garbage collector off what start-up built: it lives as long as the process.

    A full collection walks every object: over the modules, classes and tables
    loaded by now it held the event loop for 26-43 ms (bench/loop_stall.py),
    longer than any call may. Frozen objects are never walked again. (No
    collection first: it would cost that pause once more, to save a few
    objects of import-time garbage.)
    """
    gc.freeze()


class _MetricsView:
    """What the metrics read of the app (the MetricsSource protocol)."""

    def __init__(self, app: PluginApp) -> None:
        self.app = app

    def chip_metrics(self) -> Sequence[ChipMetric]:
        inventory = self.app.inventory
        if inventory is None:
            return []
        return [
            ChipMetric(
                inventory.table.chip_id(state.phy_id),
                state.healthy,
                state.health.worst_level.name,
                int(state.health.worst_level),
                state.ai_cores,
            )
            for state in inventory.chips()
        ]

    def kubelet_counters(self) -> KubeletCounters:
        dra = self.app.dra
        if dra is not None:
            claims = dra.preparer.stats
            return KubeletCounters(
                registrations=dra.registration.registrations,
                claims_prepared=claims.prepared,
                claims_unprepared=claims.unprepared,
                prepare_errors=dict(claims.errors),
            )
        face = self.app.face
        if face is None:
            return KubeletCounters()
        stats = face.stats
        return KubeletCounters(
            stats.allocations, dict(stats.allocation_errors), stats.updates_sent, face.registrations
        )

    def ready(self) -> bool:
        return self.app.ready

    def stuck_calls(self) -> Sequence[StuckCall]:
        return self.app.calls.stuck_calls()

    def abandoned_threads(self) -> int:
        return self.app.calls.abandoned_threads

    def now(self) -> float:
        return time.monotonic()

    def telemetry(self) -> TelemetryView | None:
        collector, holdings = self.app.telemetry, self.app.holdings
        if collector is None:
            return None
        return TelemetryView(collector.snapshot(), holdings.containers() if holdings is not None else ())
