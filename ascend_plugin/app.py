"""PluginApp: bring the chips up, then run every part of the plugin until told to stop.

Start-up: open the device library and find the chips (retrying with backoff
until they appear, never exiting), pick the family, check each chip's AI-core
figure against the family's bounds (a warning, never an exit), read health
once, then serve the kubelet and keep registering with it. Each long-running
part runs supervised: a part that fails is logged and restarted with backoff.

Shutdown: end every ListAndWatch stream, close the server, remove the socket,
release the library.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from ascend_plugin.allocation import Allocator, resolve_mode
from ascend_plugin.backoff import Backoff
from ascend_plugin.chip_calls import ChipCaller, ChipCallError
from ascend_plugin.endpoint import PluginEndpoint
from ascend_plugin.faults import load_table
from ascend_plugin.health import HealthMonitor, HealthPolicy
from ascend_plugin.registrar import KubeletRegistrar
from ascend_plugin.registry import DeviceRegistry, DeviceState
from ascend_plugin.service import DevicePluginService
from ascend_plugin.settings import Settings, family_overrides
from backends.base import Chip, ChipBackend, enumerate_chips
from backends.errors import BackendError, NoChips
from backends.families import family_for, family_named
from backends.library import DeviceLibrary

log = logging.getLogger(__name__)

BRING_UP_BACKOFF = Backoff(1.0, 30.0)
PART_BACKOFF = Backoff(0.5, 30.0)


def open_library(settings: Settings) -> DeviceLibrary:
    """The device library the settings ask for (not initialised yet)."""
    if settings.backend == "fake":
        from backends.fake import FakeLibrary

        assert settings.fake_scenario is not None  # enforced by Settings
        return FakeLibrary(settings.fake_scenario)
    from backends.dcmi import DcmiLibrary

    return DcmiLibrary(settings.dcmi_library, allow_untrusted=settings.dcmi_allow_untrusted_library)


@dataclass(frozen=True)
class Node:
    """What bring-up found: the family's backend and the chips."""

    backend: ChipBackend
    chips: list[Chip]


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

    @property
    def ready(self) -> bool:
        """Registered with the kubelet and the chip library answering."""
        return bool(self.registrar and self.registrar.registered and self.caller.stuck is None)

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly."""
        self.stop_requested.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; returns after a clean shutdown."""
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._serve, tasks)
                await self.stop_requested.wait()
                await self._shutdown()
                tasks.cancel_scope.cancel()
        finally:
            self.caller.shutdown()

    async def _serve(self, tasks: anyio.abc.TaskGroup) -> None:
        node = await self._bring_up()
        backend = node.backend
        await self._check_ai_cores(node)
        registry = DeviceRegistry(
            backend.table.resource_name, [DeviceState(backend.device_id(chip), chip) for chip in node.chips]
        )
        allocator = Allocator(registry, backend, resolve_mode(self.settings.allocate_mode), self.settings.host_root)
        service = DevicePluginService(registry, allocator)
        monitor = HealthMonitor(backend, self.caller, registry, self.fault_table, health_policy(self.settings))
        socket_name = self.settings.socket_name or backend.table.resource_name.rsplit("/", 1)[-1] + ".sock"
        endpoint = PluginEndpoint(service, self.settings.device_plugin_path, socket_name)
        registrar = KubeletRegistrar(endpoint, service, backend.table.resource_name, self.settings.kubelet_watch_interval)
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
        await monitor.poll_once()  # the kubelet's first list already carries real health
        tasks.start_soon(supervise, "kubelet registrar", registrar.run)
        tasks.start_soon(supervise, "health monitor", monitor.run)

    async def _bring_up(self) -> Node:
        """Open the library and find the chips, retrying until it works."""
        attempt = 0
        last_problem = ""
        while True:
            try:
                return await self._try_bring_up()
            except (BackendError, ChipCallError, OSError) as error:
                attempt += 1
                delay = BRING_UP_BACKOFF.after(attempt)
                problem = str(error)
                # One clear line per distinct problem; repeats only at debug level.
                level = logging.DEBUG if problem == last_problem else logging.ERROR
                log.log(level, "chips not available: %s; retrying in %.0f s", problem, delay, extra={"attempt": attempt})
                last_problem = problem
                await anyio.sleep(delay)

    async def _try_bring_up(self) -> Node:
        library = open_library(self.settings)
        try:
            await self.caller.call("dcmi_init", library.init)
            chips = await self.caller.call("enumerate chips", enumerate_chips, library)
            if not chips:
                raise NoChips(f"{library.description} reports no NPU chips")
            if self.settings.chip_family:
                family = family_named(self.settings.chip_family)
            else:
                family = family_for(chips[0].info)
        except BaseException:
            if self.caller.stuck is None:
                await self.caller.call("close", library.close)
            raise
        others = sorted({chip.info.chip_name for chip in chips if not family.claims(chip.info)})
        if others:
            log.warning(
                "chips of another family are served as %s too: %s", family.TABLE.family, ", ".join(others)
            )
        table = family.TABLE.with_overrides(**family_overrides(self.settings))
        backend = family(library, table)
        log.info(
            "found %d chip(s) of family %s (%s) via %s",
            len(chips),
            table.family,
            chips[0].info.chip_name,
            library.description,
        )
        return Node(backend, sorted(chips, key=lambda chip: chip.phy_id))

    async def _check_ai_cores(self, node: Node) -> None:
        """Warn, chip by chip, about AI-core figures outside the family's bounds; never refuse a chip."""
        table = node.backend.table
        for chip in node.chips:
            try:
                figure = await self.caller.call("ai_cores", node.backend.ai_cores, chip)
            except (BackendError, ChipCallError) as error:
                log.warning("cannot read the AI-core count of %s: %s", chip.label, error)
                continue
            if node.backend.ai_cores_in_bounds(figure):
                continue
            log.warning(
                "%s of family %s reports %g AI cores (from %s), outside the family's bounds [%g, %g]; "
                "the chip is served anyway. If this figure is right for your hardware, set "
                "ai_core_min/ai_core_max (--ai-core-min/--ai-core-max, ASCEND_DP_AI_CORE_MIN/_MAX, "
                "or the Helm values settings.aiCoreMin/aiCoreMax)",
                chip.label,
                table.family,
                figure.value,
                figure.source,
                table.ai_core_min,
                table.ai_core_max,
                extra={"chip": chip.phy_id, "family": table.family, "ai_cores": figure.value},
            )

    async def _shutdown(self) -> None:
        if self.registry is not None:
            self.registry.close()
        if self.service is not None:
            with anyio.move_on_after(2):
                while self.service.open_streams:
                    await anyio.sleep(0.01)
        if self.endpoint is not None:
            await self.endpoint.stop()
        if self.node is not None and self.caller.stuck is None:
            try:
                await self.caller.call("close", self.node.backend.library.close)
            except (BackendError, ChipCallError) as error:
                log.warning("closing the chip library failed: %s", error)
        log.info("stopped")


async def supervise(name: str, part: Callable[[], Awaitable[None]], backoff: Backoff = PART_BACKOFF) -> None:
    """Run ``part`` forever; log and restart it with backoff whenever it fails."""
    attempt = 0
    while True:
        try:
            await part()
            return
        except Exception:
            attempt += 1
            delay = backoff.after(attempt)
            log.exception("%s failed; restarting it in %.1f s", name, delay, extra={"part": name})
            await anyio.sleep(delay)
