"""Bring-up: open the device library and find the chips, retrying until they appear.

A node whose driver is missing, not yet loaded or broken must not crash-loop
the plugin: bring-up logs one clear line per distinct problem, keeps it for
/readyz, and retries with backoff. Once the chips are found it gathers the
facts the other parts publish (driver version, AI cores) and warns about an
implausible AI-core figure, but never refuses a chip for it: Huawei's plugin
exits on a 310B1's 1.0 AI cores and takes every healthy chip off the node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import anyio

from ascend_plugin.backoff import Backoff
from ascend_plugin.chip_calls import ChipCaller, ChipCallError
from ascend_plugin.settings import Settings, family_overrides
from backends.base import Chip, ChipBackend, enumerate_chips
from backends.errors import BackendError, NoChips
from backends.families import family_for, family_named
from backends.library import DeviceLibrary

log = logging.getLogger(__name__)

BRING_UP_BACKOFF = Backoff(1.0, 30.0)


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
    """What bring-up found: the family's backend, the chips, and facts about them."""

    backend: ChipBackend
    chips: list[Chip]
    driver_version: str = ""
    ai_cores: Mapping[int, float] = field(default_factory=dict)  # phy id -> AI-core count

    @property
    def chip_name(self) -> str:
        """The first chip's name, e.g. 310B1 (nodes hold one kind of chip)."""
        return self.chips[0].info.chip_name if self.chips else ""


class BringUp:
    """Finds the node's chips through the chip caller, however long it takes."""

    def __init__(self, settings: Settings, caller: ChipCaller) -> None:
        self.settings = settings
        self.caller = caller
        self.problem = "starting"  # why there are no chips yet, for /readyz

    async def run(self) -> Node:
        """The node's backend, chips and facts, once the library answers."""
        return await self._gather_facts(await self._find_chips())

    async def _find_chips(self) -> Node:
        """Open the library and find the chips, retrying until it works."""
        attempt = 0
        last_problem = ""
        while True:
            try:
                return await self._attempt()
            except (BackendError, ChipCallError, OSError) as error:
                attempt += 1
                delay = BRING_UP_BACKOFF.after(attempt)
                problem = str(error)
                # One clear line per distinct problem; repeats only at debug level.
                level = logging.DEBUG if problem == last_problem else logging.ERROR
                log.log(
                    level,
                    "chips not available: %s; retrying in %.0f s",
                    problem,
                    delay,
                    extra={"attempt": attempt},
                )
                last_problem = problem
                self.problem = problem
                await anyio.sleep(delay)

    async def _attempt(self) -> Node:
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

    async def _gather_facts(self, node: Node) -> Node:
        """Driver version and AI-core counts; warn about figures outside the family's bounds."""
        table = node.backend.table
        try:
            driver_version = await self.caller.call("driver_version", node.backend.library.driver_version)
        except (BackendError, ChipCallError) as error:
            log.warning("cannot read the driver version: %s", error)
            driver_version = ""
        ai_cores: dict[int, float] = {}
        for chip in node.chips:
            try:
                figure = await self.caller.call("ai_cores", node.backend.ai_cores, chip)
            except (BackendError, ChipCallError) as error:
                log.warning("cannot read the AI-core count of %s: %s", chip.label, error)
                continue
            ai_cores[chip.phy_id] = figure.value
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
        return replace(node, driver_version=driver_version, ai_cores=ai_cores)
