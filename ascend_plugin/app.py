"""PluginApp: bring the chips up, then run every part of the plugin until told to stop.

Start-up: find the chips (:mod:`ascend_plugin.bring_up`, retrying until they
appear, never exiting), read their health once, then serve the kubelet and keep
registering with it; the Kubernetes side follows the first registration. Each
long-running part runs supervised: a part that fails is logged and restarted
with backoff.

Shutdown: end every ListAndWatch stream, close the server, remove the socket,
release the library.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import anyio
from anyio.abc import TaskGroup
from pydantic import ValidationError

from ascend_plugin.allocation import AllocateMode, Allocator, resolve_mode
from ascend_plugin.bring_up import BringUp, Node
from ascend_plugin.cdi import CdiSpec
from ascend_plugin.chip_calls import ChipCaller, ChipCallError
from ascend_plugin.endpoint import PluginEndpoint
from ascend_plugin.faults import FaultTable, load_table
from ascend_plugin.health import HealthMonitor, HealthPolicy
from ascend_plugin.http_endpoint import STUCK_IS_DEAD, HttpEndpoint, Probe, Routes
from ascend_plugin.metrics import PluginMetrics
from ascend_plugin.registrar import KubeletRegistrar
from ascend_plugin.registry import DeviceRegistry, DeviceState
from ascend_plugin.service import DevicePluginService
from ascend_plugin.settings import Settings, SettingsError, describe_validation_error
from ascend_plugin.supervise import supervise
from backends.errors import BackendError

log = logging.getLogger(__name__)


# Settings an operator may change while the plugin runs (config ConfigMap).
RELOADABLE = frozenset(
    {
        "health_interval",
        "health_failure_threshold",
        "health_flap_threshold",
        "health_flap_window",
        "health_flap_hold",
        "log_level",
    }
)


def health_policy(settings: Settings) -> HealthPolicy:
    """The health knobs of the settings."""
    return HealthPolicy(
        interval=settings.health_interval,
        failure_threshold=settings.health_failure_threshold,
        flap_threshold=settings.health_flap_threshold,
        flap_window=settings.health_flap_window,
        flap_hold=settings.health_flap_hold,
    )


class PluginApp:
    """One plugin process's parts, wired together."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.caller = ChipCaller(settings.dcmi_call_timeout)
        self.fault_table = load_table(settings.fault_levels_file)
        self.node: Node | None = None
        self.registry: DeviceRegistry | None = None
        self.service: DevicePluginService | None = None
        self.registrar: KubeletRegistrar | None = None
        self.monitor: HealthMonitor | None = None
        self.endpoint: PluginEndpoint | None = None
        self.stop_requested = anyio.Event()
        self.registered_once = anyio.Event()
        self.bring_up = BringUp(settings, self.caller)
        self.http: HttpEndpoint | None = None
        self.metrics = PluginMetrics(self)
        self.caller.on_call_done(self.metrics.observe_call)

    @property
    def ready(self) -> bool:
        """Registered with the kubelet and the chip library answering."""
        return self.readiness().ok

    def liveness(self) -> Probe:
        """Alive unless a driver call has been stuck so long that only a restart can help."""
        stuck = self.caller.stuck
        if stuck is not None and (stuck_for := time.monotonic() - stuck.since) > STUCK_IS_DEAD:
            return Probe(False, f"driver call {stuck.name} stuck for {stuck_for:.0f} s")
        return Probe(True, "ok")

    def readiness(self) -> Probe:
        """Ready when registered with the kubelet and the driver answering; otherwise why not."""
        if self.node is None or self.registry is None:
            return Probe(False, f"chips not available: {self.bring_up.problem}")
        if (stuck := self.caller.stuck) is not None:
            return Probe(False, f"driver call {stuck.name} is stuck")
        if self.registrar is None or not self.registrar.registered:
            why = (
                self.registrar.last_error
                if self.registrar and self.registrar.last_error
                else "waiting for it"
            )
            return Probe(False, f"not registered with the kubelet: {why}")
        devices = self.registry.devices()
        healthy = sum(1 for device in devices if device.healthy)
        return Probe(True, f"ready: {healthy} of {len(devices)} devices healthy")

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly."""
        self.stop_requested.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; returns after a clean shutdown."""
        try:
            async with anyio.create_task_group() as tasks:
                if self.settings.http_address:
                    routes = Routes(self.liveness, self.readiness, self.metrics.render)
                    self.http = HttpEndpoint(self.settings.http_address, routes)
                    tasks.start_soon(supervise, "operations endpoint", self.http.serve_forever)
                tasks.start_soon(self._serve, tasks)
                await self.stop_requested.wait()
                await self._shutdown()
                tasks.cancel_scope.cancel()
        finally:
            self.caller.shutdown()

    async def _serve(self, tasks: TaskGroup) -> None:
        node = await self.bring_up.run()
        backend = node.backend
        registry = DeviceRegistry(
            backend.table.resource_name, [DeviceState(backend.device_id(chip), chip) for chip in node.chips]
        )
        mode = resolve_mode(self.settings.allocate_mode)
        cdi = self._write_cdi_spec(node) if mode is AllocateMode.CDI else None
        allocator = Allocator(registry, backend, mode, self.settings.host_root, cdi)
        service = DevicePluginService(registry, allocator)
        monitor = HealthMonitor(
            backend, self.caller, registry, table=self.fault_table, policy=health_policy(self.settings)
        )
        socket_name = self.settings.socket_name or backend.table.resource_name.rsplit("/", 1)[-1] + ".sock"
        endpoint = PluginEndpoint(service, self.settings.device_plugin_path, socket_name)
        registrar = KubeletRegistrar(
            endpoint, service, backend.table.resource_name, self.settings.kubelet_watch_interval
        )
        self.node, self.registry, self.service = node, registry, service
        self.monitor, self.endpoint, self.registrar = monitor, endpoint, registrar
        log.info(
            "serving %d %s device(s) as %s in %s mode",
            len(node.chips),
            backend.table.family,
            backend.table.resource_name,
            allocator.mode.value,
            extra={"devices": [device.id for device in registry.devices()], "family": backend.table.family},
        )
        monitor.on_round(self.metrics.round_seconds.observe)
        await monitor.poll_once()  # the kubelet's first list already carries real health
        registrar.on_registered(self.registered_once.set)
        tasks.start_soon(supervise, "kubelet registrar", registrar.run)
        tasks.start_soon(supervise, "health monitor", monitor.run)
        if self.settings.node_name:
            tasks.start_soon(self._run_kube)
        else:
            log.warning(
                "NODE_NAME is not set: node labels, the device-info ConfigMap, config reload and node events "
                "are off (the Helm chart sets NODE_NAME from the downward API)"
            )

    def _write_cdi_spec(self, node: Node) -> CdiSpec:
        """The node's CDI spec, written where the runtime looks; a failure is logged, not fatal.

        Without the spec, containers given NPUs fail to start; the kubelet side
        still serves, so the log line (and the fix it names) is what matters.
        """
        spec = CdiSpec(
            self.settings.cdi_kind,
            self.settings.cdi_spec_dir,
            node.backend,
            node.chips,
            self.settings.host_root,
        )
        try:
            spec.write()
            log.info("wrote the CDI spec", extra={"path": str(spec.path), "kind": spec.kind})
        except OSError as error:
            log.error(
                "cannot write the CDI spec %s: %s; containers given NPUs will not start until it exists. "
                "Mount the runtime's CDI directory (/var/run/cdi) writable, or set cdi_spec_dir",
                spec.path,
                error.strerror,
            )
        return spec

    async def _run_kube(self) -> None:
        """The Kubernetes side, started only after the first registration.

        kubernetes-asyncio costs tens of MB and most of a second to import, so it
        is never imported before the kubelet has its devices, nor at all when
        the kube features are off.
        """
        await self.registered_once.wait()
        from ascend_plugin.kube import run_kube

        await supervise("kubernetes", lambda: run_kube(self))

    def reconfigure(self, overrides: Mapping[str, object]) -> list[str]:
        """Apply run-time overrides atomically; return the names of the settings that changed.

        Raises SettingsError (and changes nothing) when a key may not change at
        run time or a value is invalid.
        """
        refused = sorted(set(overrides) - RELOADABLE)
        if refused:
            allowed = ", ".join(sorted(RELOADABLE))
            raise SettingsError(
                f"settings {', '.join(refused)} cannot change at run time; allowed: {allowed}"
            )
        try:
            updated = Settings.model_validate({**self.settings.model_dump(), **overrides})
        except ValidationError as error:
            raise SettingsError(describe_validation_error(error)) from error
        changed = [
            name for name in sorted(overrides) if getattr(updated, name) != getattr(self.settings, name)
        ]
        self.settings = updated
        logging.getLogger().setLevel(updated.log_level)
        if self.monitor is not None:
            self.monitor.policy = health_policy(updated)
            self.monitor.wake()
        if changed:
            log.info("settings changed at run time: %s", ", ".join(changed), extra={"changed": changed})
        return changed

    def replace_fault_table(self, table: FaultTable) -> None:
        """Use a new fault-level table from the next health round on."""
        self.fault_table = table
        if self.monitor is not None:
            self.monitor.table = table
            self.monitor.wake()

    async def _shutdown(self) -> None:
        if self.registry is not None:
            self.registry.close()
        if self.service is not None:
            with anyio.move_on_after(2):
                await self.service.streams_ended()
        if self.endpoint is not None:
            await self.endpoint.stop()
        if self.node is not None and self.caller.stuck is None:
            try:
                await self.caller.call("close", self.node.backend.library.close)
            except (BackendError, ChipCallError) as error:
                log.warning("closing the chip library failed: %s", error)
        log.info("stopped")
