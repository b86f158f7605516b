"""Pieces the Kubernetes-side tests build a plugin's view of its node from.

The publishers read an :class:`~ascend_plugin.inventory.inventory.Inventory`;
building one directly (real classes, a family's real table) lets a test flip a
chip's health in one line instead of editing a scenario and waiting for a
poll. The end-to-end test drives the whole plugin instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ascend_plugin.faces.kube.publishers import KubeInputs
from ascend_plugin.fault_policy.config import base_config
from ascend_plugin.fault_policy.faults import Fault, FaultLevel
from ascend_plugin.fault_policy.policy import FaultPolicy, FaultSources
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.inventory.verdict import Verdict
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.settings import Settings
from backends.chips import Chip
from backends.families import family_named
from backends.library import ChipInfo

NODE = "npu-node-1"


def make_inventory(
    directory: Path,
    *,
    family: str = "310B",
    chip_name: str = "310B1",
    phy_ids: Sequence[int] = (0,),
    ai_cores: Mapping[int, float] | None = None,
    driver_version: str = "24.1.rc1",
) -> Inventory:
    """A node of ``family`` with one healthy chip per physical id (``directory`` names its library)."""
    table = family_named(family).TABLE
    info = ChipInfo(chip_type="Ascend", chip_name=chip_name, chip_ver="V1", aicore_cnt=0)
    cores = ai_cores if ai_cores is not None else dict.fromkeys(phy_ids, table.ai_core_nominal)
    healthy = Verdict(known=True, healthy=True, reason="")
    chips = [
        ChipState(
            Chip(card_id=phy, device_id=0, logic_id=phy, phy_id=phy, info=info), healthy, cores.get(phy)
        )
        for phy in phy_ids
    ]
    return Inventory(NodeFacts(table, str(directory / "scenario.json"), driver_version), chips)


def set_faults(inventory: Inventory, device_id: str, *faults: tuple[int, FaultLevel]) -> None:
    """Give a chip (named by its device ID) these faults; unhealthy when the worst is below SubHealthFault."""
    found = tuple(sorted((Fault(code, level) for code, level in faults), key=lambda f: (-f.level, f.code)))
    healthy = not found or found[0].level.healthy
    reason = "" if healthy else f"fault {found[0]}"
    phy = int(device_id.rsplit("-", 1)[1])
    inventory.set_health(phy, Verdict(known=True, healthy=healthy, reason=reason, faults=found))


@asynccontextmanager
async def running(*parts: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """Run ``parts`` in the background for the duration of the block, then cancel them."""
    async with anyio.create_task_group() as tasks:
        for part in parts:
            tasks.start_soon(part)
        yield
        tasks.cancel_scope.cancel()


class Judged:
    """An inventory whose chips carry the fault policy's judgements, as the health monitor records them.

    Each :meth:`judge` puts the policy's judgement of every chip into the
    inventory; the policy's changes (an operator's release, what a restart read
    back, a new configuration) judge again, as the monitor does.
    """

    def __init__(self, inventory: Inventory, policy: FaultPolicy) -> None:
        self.inventory = inventory
        self.policy = policy
        self.stop = policy.on_change(self.judge)

    def judge(self) -> None:
        for state in self.inventory.chips():
            judged = self.policy.judge(state.phy_id)
            reason = "" if judged.healthy else f"fault level {judged.level.name}"
            health = Verdict(known=True, healthy=judged.healthy, reason=reason, judgement=judged)
            self.inventory.set_health(state.phy_id, health)


@dataclass(frozen=True)
class JudgedNode:
    """A two-chip 910B3 node whose judgements come from a fault policy, for run_kube over loopback."""

    settings: Settings
    inventory: Inventory
    faults: FaultSources
    judged: Judged

    def inputs(self, **extra: Any) -> KubeInputs:
        """What run_kube draws on for this node (``extra``: notices, held chips, ...)."""
        return KubeInputs(
            self.settings, NODE, LiveConfig(self.settings), self.inventory, faults=self.faults, **extra
        )


def judged_node(directory: Path, kubeconfig: Path, **settings: Any) -> JudgedNode:
    """The node on the built-in fault configuration; ``settings`` over the Kubernetes side's (labels off)."""
    chosen = Settings(
        backend="fake",
        fake_scenario=directory / "scenario.json",
        node_name=NODE,
        kubeconfig=kubeconfig,
        node_labels=False,
        **settings,
    )
    inventory = make_inventory(directory, family="910", chip_name="910B3", phy_ids=(0, 1))
    faults = FaultSources(base_config(None))
    return JudgedNode(chosen, inventory, faults, Judged(inventory, faults.policy))
