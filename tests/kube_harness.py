"""Pieces the Kubernetes-side tests build a plugin's view of its node from.

The kube parts take a :class:`~ascend_plugin.app.Node` and a
:class:`~ascend_plugin.registry.DeviceRegistry`; building them directly (real
classes, a family's real table) lets a test flip a device's health in one line
instead of editing a scenario and waiting for a health round. The end-to-end
test drives the whole plugin instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from ascend_plugin.bring_up import Node
from ascend_plugin.faults import Fault, FaultLevel
from ascend_plugin.registry import DeviceRegistry, DeviceState
from backends.base import Chip, ChipBackend
from backends.fake import FakeLibrary
from backends.families import family_named
from backends.library import ChipInfo

NODE = "npu-node-1"


def make_node(
    directory: Path,
    *,
    family: str = "310B",
    chip_name: str = "310B1",
    phy_ids: Sequence[int] = (0,),
    ai_cores: Mapping[int, float] | None = None,
    driver_version: str = "24.1.rc1",
) -> Node:
    """A node of ``family`` with one chip per physical id, its fake library's scenario in ``directory``."""
    scenario = directory / "scenario.json"
    chip_list = [{"phy_id": phy} for phy in phy_ids]
    scenario.write_text(json.dumps({"chip_name": chip_name, "chips": chip_list}), encoding="utf-8")
    info = ChipInfo(chip_type="Ascend", chip_name=chip_name, chip_ver="V1", aicore_cnt=0)
    chips = [Chip(card_id=phy, device_id=0, logic_id=phy, phy_id=phy, info=info) for phy in phy_ids]
    backend_class = family_named(family)
    backend: ChipBackend = backend_class(FakeLibrary(scenario))
    cores = ai_cores if ai_cores is not None else dict.fromkeys(phy_ids, backend.table.ai_core_nominal)
    return Node(backend, chips, driver_version=driver_version, ai_cores=cores)


def make_registry(node: Node) -> DeviceRegistry:
    """A registry with every chip of ``node`` healthy."""
    backend = node.backend
    return DeviceRegistry(
        backend.table.resource_name, [DeviceState(backend.device_id(chip), chip) for chip in node.chips]
    )


def set_faults(registry: DeviceRegistry, device_id: str, *faults: tuple[int, FaultLevel]) -> None:
    """Give a device these faults; it is unhealthy when the worst is worse than SubHealthFault."""
    found = tuple(sorted((Fault(code, level) for code, level in faults), key=lambda f: (-f.level, f.code)))
    healthy = not found or found[0].level.healthy
    reason = "" if healthy else f"fault {found[0]}"
    registry.update(device_id, faults=found, healthy=healthy, reason=reason)


@asynccontextmanager
async def running(*parts: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """Run ``parts`` in the background for the duration of the block, then cancel them."""
    async with anyio.create_task_group() as tasks:
        for part in parts:
            tasks.start_soon(part)
        yield
        tasks.cancel_scope.cancel()
