"""PluginApp: wiring only. It builds each part with exactly what it needs and runs them.

Discovery finds the chips (retrying, never exiting), the monitor looks at each once, then the parts run as
named supervised root tasks: the monitor, the device-plugin face or (``serve: dra``) the DRA face, the CDI
spec, hot reset, and the Kubernetes side once the kubelet has its devices. Settings that cannot work with
the chips found end :meth:`PluginApp.run` with their SettingsError after a clean shutdown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ascend_plugin import heap
from ascend_plugin.changes import Changes
from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls
from ascend_plugin.faces.deviceplugin.face import DevicePluginFace, FaceSettings
from ascend_plugin.faces.operations.http_endpoint import HttpEndpoint, Probe, Routes
from ascend_plugin.faces.operations.metrics import PluginMetrics
from ascend_plugin.faces.operations.metrics_source import PluginSource
from ascend_plugin.faces.operations.probes import LIMITS, PluginProbes, ProbeLimits
from ascend_plugin.faces.operations.telemetry_metrics import TelemetryView
from ascend_plugin.faces.volcano import checks_volcano_choices
from ascend_plugin.fault_policy.config import base_config
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.handover.cdi import CdiSpec
from ascend_plugin.handover.host_devices import HostDevices
from ascend_plugin.handover.modes import MODES, HandoverContext, HandoverMode, resolve_mode
from ascend_plugin.holdings.held import ChipResolver, ClaimNames, DeviceChooser, DevicePluginIds, HeldChips
from ascend_plugin.holdings.pod_resources import PodResourcesClient
from ascend_plugin.hot_reset.budget import BUDGET_FILE
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.hot_reset.sequence import Shown
from ascend_plugin.instance_lock import InstanceLock
from ascend_plugin.inventory.discovery import Discovery, DiscoverySettings, Node
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.inventory.monitor import HealthMonitor, health_policy
from ascend_plugin.kubeapi.shared import SharedClient
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.offers.node_offers import Notice, OfferSettings, plan_dra, plan_offers
from ascend_plugin.resilience import RootTask, Supervision, run_root_tasks
from ascend_plugin.settings import Settings, SettingsError, served_directory
from ascend_plugin.telemetry.collector import TelemetryCollector, TelemetryPolicy
from backends.errors import ChipError

if TYPE_CHECKING:  # the DRA face imports kubernetes-asyncio: loaded only with serve=dra
    from ascend_plugin.faces.dra.face import DraFace
    from ascend_plugin.faces.kube.publishers import SidePart
    from ascend_plugin.faces.volcano.unfollowed import UnfollowedChoices

log = logging.getLogger(__name__)

# The root tasks the kubelet is served through: readiness needs the one the settings choose running.
DEVICE_PLUGIN_PART = "device plugin"
DRA_PART = "DRA driver"


@dataclass(frozen=True)
class Parts:
    """The parts built once the chips are found, published together when all are built."""

    monitor: HealthMonitor
    face: DevicePluginFace | None = None  # serve=device-plugin
    dra: DraFace | None = None  # serve=dra
    hot_reset: HotResetManager | None = None  # hot_reset on


@dataclass(frozen=True)
class VolcanoParts:
    """Volcano mode's parts: the chooser Allocate asks and the face's root task."""

    chooser: DeviceChooser
    task: RootTask


class PluginApp:
    """One plugin process's parts, wired together."""

    def __init__(
        self,
        settings: Settings,
        *,
        settle_heap: bool = False,
        supervision: Supervision | None = None,
        limits: ProbeLimits = LIMITS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``settle_heap``: :mod:`ascend_plugin.heap` (the daemon's; a process of many apps must not).
        ``clock``: hot reset's; ``wall_clock``: the fault policy's (Unix seconds). Tests move both.
        """
        self.settings = settings
        self.clock = clock
        self.settle_heap = settle_heap
        self.config = LiveConfig(settings)
        # The fault configuration's inputs (fault_levels_file and the built-ins now; the ConfigMaps once the
        # Kubernetes side runs) and the one policy that judges every chip's faults by them.
        self.faults = FaultSources(base_config(settings.fault_levels_file), wall_clock)
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
            notes=lambda: (
                self.parts.dra.notes if self.parts is not None and self.parts.dra is not None else []
            ),
            resets=lambda: self.hot_reset.in_progress() if self.hot_reset is not None else [],
        )
        self.metrics_source = PluginSource(
            self.discovery, self.calls, self.probes, self.faults.policy, node=settings.node_name or ""
        )
        self.metrics = PluginMetrics(self.metrics_source)
        self.calls.on_call_done(self.metrics.observe_call)
        self.config.on_change(self._log_level_changed)
        self.parts: Parts | None = None
        # Which container holds which chips (the kubelet's PodResources), and the chips held, in every mode.
        self.held = HeldChips(PodResourcesClient(settings.pod_resources_socket))
        self.unfollowed: UnfollowedChoices | None = None  # Volcano's choices checked (Volcano mode off)
        self.telemetry: TelemetryCollector | None = None  # the chips' telemetry, unless turned off
        self.http: HttpEndpoint | None = None
        # The one API client every face that talks to the API server shares (connected when first used).
        self.kube_client = SharedClient(settings.kubeconfig)
        self.stop_requested = Changes()  # bumped by stop()
        self.registered = Changes()  # bumped at every registration with the kubelet
        self._refused: SettingsError | None = None

    @property
    def node(self) -> Node | None:
        """The node's chips and the backend they are reached through, once discovery found them."""
        return self.discovery.node

    @property
    def inventory(self) -> Inventory | None:
        """The node's chips, once discovery found them."""
        return self.node.inventory if self.node is not None else None

    @property
    def monitor(self) -> HealthMonitor | None:
        """The health monitor, once the parts are built."""
        return self.parts.monitor if self.parts is not None else None

    @property
    def face(self) -> DevicePluginFace | None:
        """The device-plugin face, once the parts are built (serve=device-plugin)."""
        return self.parts.face if self.parts is not None else None

    @property
    def dra(self) -> DraFace | None:
        """The DRA driver face, once the parts are built (serve=dra)."""
        return self.parts.dra if self.parts is not None else None

    @property
    def hot_reset(self) -> HotResetManager | None:
        """The hot-reset manager, once the parts are built (hot_reset on)."""
        return self.parts.hot_reset if self.parts is not None else None

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

    def stop(self, refused: SettingsError | None = None) -> None:
        """Ask :meth:`run` to shut down cleanly; with ``refused``, :meth:`run` raises it afterwards."""
        self._refused = self._refused or refused
        self.stop_requested.bump()

    async def run(self) -> None:
        """Run until :meth:`stop`; after a clean shutdown, raise the SettingsError it stopped for, if any."""
        tasks = [RootTask("plugin", self._serve)]
        if self.settings.http_address:
            routes = Routes(self.liveness, self.readiness, self.metrics.render)
            self.http = HttpEndpoint(self.settings.http_address, routes)
            tasks.append(RootTask("operations endpoint", self.http.serve_forever))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(run_root_tasks, tasks, self.supervision)
                await self.stop_requested.wait_for_change(0)
                if self.node is not None:
                    self.node.inventory.close()  # what follows the chips sees the end
                group.cancel_scope.cancel()  # the faces' runs close what they served as they end
            await self._release_library()
        finally:
            self.calls.shutdown()
            self.lock.release()  # after the sockets are gone: the next instance finds none of ours
        if self._refused is not None:
            raise self._refused

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
            faults=self.faults.policy,
            held=self.held,
        )
        await monitor.poll_all()  # the kubelet's first list already carries real verdicts (and vNPUs)
        watched = [
            RootTask("health monitor", monitor.run),
            RootTask("chip discovery", self.discovery.read_the_rest),
        ]
        telemetry = None
        if settings.telemetry:
            telemetry = self.telemetry = TelemetryCollector(
                node.backend,
                self.calls,
                inventory,
                lambda: TelemetryPolicy.from_settings(self.config.settings),
                align=monitor.between_ticks,
            )
            self.metrics_source.telemetry_of = self._telemetry_view
            watched.append(RootTask("telemetry", self.telemetry.run))
        host = HostDevices(inventory.table, settings.host_root, inventory.facts.super_pod)
        if host.unnamed:
            log.warning(
                "containers get no HCCL_TOPO_FILE_PATH: %s; a job whose HCCL needs it sets it in the pod",
                host.unnamed,
                extra={"reason": "TopologyFileUnnamed"},
            )
        try:
            if settings.serve == "dra":  # the chips through the DRA face; no offers, no device plugin
                tasks = self._dra_tasks(node, monitor, host)
            else:
                tasks = self._device_plugin_tasks(node, monitor, host)
        except SettingsError as refused:  # settings that cannot work with these chips: no restart helps
            self.stop(refused)
            return
        if self.settle_heap:
            heap.settle()
        # The listeners of this run, added once nothing can fail before the run and taken back after it.
        stops = [
            self.config.on_change(lambda changed: monitor.wake()),
            self.faults.policy.on_change(monitor.wake),  # a new fault configuration, a release
        ]
        if telemetry is not None:
            waking = telemetry
            stops.append(self.config.on_change(lambda changed: waking.wake()))
        try:
            await run_root_tasks([*watched, *tasks])
        finally:
            for stop in stops:
                stop()

    def _device_plugin_tasks(self, node: Node, monitor: HealthMonitor, host: HostDevices) -> list[RootTask]:
        """The device-plugin face, its CDI spec, Volcano mode, and the Kubernetes publishers."""
        settings, inventory = self.settings, node.inventory
        plan = plan_offers(OfferSettings.from_settings(settings), inventory, node.backend)
        for notice in plan.notices:
            log.log(notice.level, "%s", notice.message, extra={"reason": notice.reason})
        book = OfferBook(inventory, plan.offers)
        mode = resolve_mode(settings.allocate_mode)
        cdi = CdiSpec(settings.cdi_kind, settings.cdi_spec_dir, host)
        handover = MODES[mode](HandoverContext(inventory.table, host, cdi))
        resolver = self.held.resolver = ChipResolver(book)
        volcano = self._volcano(node, book) if settings.volcano else None
        resolver.chooser = volcano.chooser if volcano is not None else None
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
            volcano.chooser if volcano is not None else None,
            held=self.held,
        )
        face.on_registered(self.registered.bump)
        face.on_registered(self.lock.keep_note)
        self.metrics_source.kubelet = face.counters
        hot_reset = self._hot_reset(node, monitor, face.shown)
        self.parts = Parts(monitor, face=face, hot_reset=hot_reset)
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
        tasks = [
            RootTask(DEVICE_PLUGIN_PART, face.run, face.problems),
            RootTask("pod holdings", self.held.run),
        ]
        if hot_reset is not None:
            tasks.append(RootTask("hot reset", hot_reset.run))
        if mode is HandoverMode.CDI:
            tasks.append(RootTask("CDI spec", lambda: cdi.keep_written(book), cdi.problems))
        if volcano is not None:
            tasks.append(volcano.task)
        if settings.node_name:
            node_name, warnings = settings.node_name, plan.warnings
            # The free list leaves held chips out in Volcano mode only, as Huawei's: elsewhere Volcano
            # subtracts the pods it placed itself, and would count held chips twice.
            held = self.held if volcano is not None else None
            checked = self.held if checks_volcano_choices(settings) else None
            tasks.append(
                RootTask(
                    "kubernetes",
                    lambda: self._run_kube(node_name, inventory, warnings, held, checked),
                    self._unfollowed_problems,
                )
            )
        else:
            log.warning(
                "NODE_NAME is not set: node labels, the device-info ConfigMap, config reload and node events "
                "are off (the Helm chart sets NODE_NAME from the downward API)"
            )
        return tasks

    def _dra_tasks(self, node: Node, monitor: HealthMonitor, host: HostDevices) -> list[RootTask]:
        """The DRA driver face, hot reset, and the Kubernetes publishers once the kubelet registered it."""
        from ascend_plugin.faces.dra.face import DraFace, DraSettings

        inventory = node.inventory
        plan = plan_dra(OfferSettings.from_settings(self.settings), inventory, node.backend)
        for notice in plan.notices:
            log.log(notice.level, "%s", notice.message, extra={"reason": notice.reason})
        dra_settings = DraSettings.from_settings(self.settings)
        from ascend_plugin.faces.dra.names import chip_of

        # Claims' devices, and the device IDs of pods a device plugin served before the node moved.
        table = inventory.table
        plugin_ids = DevicePluginIds(
            table.resource_name, table.device_id_prefix, {state.phy_id for state in inventory.chips()}
        )
        claims = ClaimNames(dra_settings.driver, dra_settings.node, chip_of)
        self.held.resolver = ChipResolver(claims=claims, plugin_ids=plugin_ids)
        dra = DraFace(
            inventory, host, dra_settings, plan, self.calls, held=self.held, client=self.kube_client
        )
        dra.on_registered(self.registered.bump)
        dra.on_registered(self.lock.keep_note)
        self.metrics_source.kubelet = dra.counters
        hot_reset = self._hot_reset(node, monitor, dra.shown)
        self.parts = Parts(monitor, dra=dra, hot_reset=hot_reset)
        log.info(
            "serving %d %s chip(s) as DRA driver %s, pool %s",
            len(inventory.chips()),
            inventory.table.family,
            dra_settings.driver,
            dra_settings.node,
            extra={"driver": dra_settings.driver, "pool": dra_settings.node},
        )
        tasks = [
            RootTask(DRA_PART, dra.run, dra.problems),
            RootTask("pod holdings", self.held.run),
            RootTask("kubernetes", lambda: self._run_kube(dra_settings.node, inventory, plan.warnings, None)),
        ]
        if hot_reset is not None:
            tasks.append(RootTask("hot reset", hot_reset.run))
        return tasks

    async def _run_kube(
        self,
        node_name: str,
        inventory: Inventory,
        notices: tuple[Notice, ...],
        held: HeldChips | None,
        volcano_checked: HeldChips | None = None,
    ) -> None:
        """The Kubernetes side, after the first registration: kubernetes-asyncio costs tens of MB
        and most of a second to import, and the kubelet must not wait for it.
        """
        await self.registered.wait_for_change(0)
        from ascend_plugin.faces.kube.publishers import KubeInputs, run_kube

        if self.settle_heap:
            heap.settle()  # and the Kubernetes client's, as large again
        side_parts: tuple[SidePart, ...] = ()
        if volcano_checked is not None:  # Volcano mode off where Volcano may place pods: its choices checked
            from ascend_plugin.faces.kube.publishers import SidePart
            from ascend_plugin.faces.volcano.unfollowed import UnfollowedChoices

            self.unfollowed = UnfollowedChoices(volcano_checked, [inventory.table.resource_name])
            side_parts = (SidePart("Volcano choices check", self.unfollowed.run),)
        inputs = KubeInputs(
            self.settings,
            node_name,
            self.config,
            inventory,
            faults=self.faults,
            held=held,
            notices=notices,
            hot_reset=self.hot_reset,
            side_parts=side_parts,
            client=self.kube_client,
        )
        await run_kube(inputs)

    def _unfollowed_problems(self) -> list[str]:
        """What the check of Volcano's choices reports (/readyz), once the Kubernetes side runs it."""
        return self.unfollowed.problems() if self.unfollowed is not None else []

    def _telemetry_view(self) -> TelemetryView | None:
        """The chips' telemetry and who holds each chip, for one scrape."""
        collector = self.telemetry
        if collector is None:
            return None
        return TelemetryView(collector.snapshot(), self.held.containers(), collector.cards)

    def _hot_reset(self, node: Node, monitor: HealthMonitor, shown: Shown) -> HotResetManager | None:
        """The hot-reset manager, with hot_reset on (it waits for the kubelet to be ``shown``)."""
        if not self.settings.hot_reset:
            return None
        manager = HotResetManager(
            node.backend,
            self.calls,
            node.inventory,
            held=self.held,
            idle=self.settings.hot_reset_idle,
            look_again=monitor.look_again,
            shown=shown,
            reads_annotation=bool(self.settings.node_name),
            clock=self.clock,
            budget_file=served_directory(self.settings) / BUDGET_FILE,
        )
        self.metrics_source.hot_reset = manager
        return manager

    def _volcano(self, node: Node, book: OfferBook) -> VolcanoParts:
        """Volcano mode's face, imported at start: without its pod cache Allocate has no answer."""
        from ascend_plugin.faces.volcano.face import VolcanoFace, VolcanoSettings

        volcano = VolcanoFace(
            VolcanoSettings.from_settings(self.settings),
            book,
            node.inventory,
            calls=self.calls,
            backend=node.backend,
            held=self.held,
            client=self.kube_client,
        )
        log.info("Volcano mode: %s chips are the ones Volcano chose", node.inventory.table.resource_name)
        return VolcanoParts(volcano.chooser, RootTask("volcano", volcano.run))

    def _log_level_changed(self, changed: list[str]) -> None:
        if "log_level" in changed:
            logging.getLogger().setLevel(self.config.settings.log_level)

    async def _release_library(self) -> None:
        """Close the library once no call is inside it; left loaded while one still hangs."""
        if self.node is None:
            return
        if not await self.calls.drain_chip_lanes():
            log.warning(
                "a driver call still hangs: the chip library is left loaded (unloading it would crash)"
            )
        else:
            try:
                await self.calls.call(NODE, "close", self.node.backend.close)
            except (ChipError, ChipCallError) as error:
                log.warning("closing the chip library failed: %s", error)
        log.info("stopped")
