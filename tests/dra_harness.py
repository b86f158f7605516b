"""What the DRA tests build on: a node (directories, scenario, settings), claims as the scheduler makes them.

A test runs the whole plugin with ``serve=dra`` in-process, the grpcio
kubelet stand-in (:mod:`ascend_plugin.testing.dra_standin`) on its registry
directory, and the loopback fake API server; claims are put into the API
server the way the scheduler leaves them (``status.allocation``), and the
kubelet stand-in asks the driver to prepare them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from fake_apiserver import FakeApiServer
from plugin_harness import fast_settings

from ascend_plugin.app import PluginApp
from ascend_plugin.inventory.inventory import ChipState, Inventory, NodeFacts
from ascend_plugin.inventory.verdict import Verdict
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1
from ascend_plugin.settings import Settings
from ascend_plugin.testing.dra_standin import DraKubeletStandIn, KubeletApi
from backends.chips import Chip
from backends.families import family_named
from backends.library import ChipInfo
from backends.topology import ChipFacts, assign_units
from backends.vnpu_split import ChipSplits

DRIVER = "npu.huawei.com"
NODE = "npu-node-1"
CDI_KIND = "huawei.com/npu"

# An Atlas 800T A2: eight 910B3 in one full mesh, 64 GiB of HBM each, PCIe addresses.
A2_SERVER: dict[str, Any] = {
    "chip_name": "910B3",
    "aicore": 20.0,
    "memory_mb": 65536,
    "chips": [
        {"phy_id": phy, "card_id": phy, "device_id": 0, "pcie": f"0000:{0xC1 + phy:02x}:00.0"}
        for phy in range(8)
    ],
}

# A first-generation 910 server: two HCCS rings of four.
A1_SERVER: dict[str, Any] = {
    "chip_name": "910A",
    "aicore": 32.0,
    "memory_mb": 32768,
    "chips": [{"phy_id": phy, "card_id": phy, "device_id": 0} for phy in range(8)],
}


# An Atlas 300I Duo pair: four 310P3, two to a card, 24 GiB each.
DUO_SERVER: dict[str, Any] = {
    "chip_name": "310P3",
    "aicore": 8.0,
    "memory_mb": 24576,
    "chips": [{"phy_id": phy, "card_id": phy // 2, "device_id": phy % 2} for phy in range(4)],
}


def validated(slices: Sequence[dict[str, Any]], versions: Sequence[str] = ("1.36", "1.37")) -> None:
    """Every slice passes the versions' schemas; the pool is usable (the real API server's own rules for
    the plugin's slices are checked by tests/e2e/test_slice_admission.py)."""
    import kubernetes_validate
    from dra_pools import pool_problems

    for version in versions:
        for slice_ in slices:
            kubernetes_validate.validate(slice_, version, strict=True)
    assert pool_problems(slices) == []


@dataclass
class DraNode:
    """A node for the DRA driver: its fake chips, host root, the kubelet's directories, the CDI directory."""

    root: Path

    @property
    def scenario(self) -> Path:
        return self.root / "node.json"

    @property
    def host_root(self) -> Path:
        return self.root / "host"

    @property
    def registry_dir(self) -> Path:
        return self.root / "registry"

    @property
    def plugin_dir(self) -> Path:
        return self.root / "plugins" / DRIVER

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    @property
    def checkpoint(self) -> Path:
        return self.plugin_dir / "checkpoint.json"

    def read(self) -> dict[str, Any]:
        """The scenario as written last."""
        data: dict[str, Any] = json.loads(self.scenario.read_text(encoding="utf-8"))
        return data

    def set_faults(self, faults: dict[int, list[str]]) -> None:
        """Give chips (by physical id) these fault codes, the others none."""
        scenario = self.read()
        scenario["chips"] = [
            {**chip, "fault_codes": faults.get(chip["phy_id"], [])} for chip in scenario["chips"]
        ]
        self.write(scenario)

    def write(self, scenario: dict[str, Any]) -> None:
        """Replace the scenario atomically (the plugin never reads half a file)."""
        temporary = self.scenario.with_suffix(".tmp")
        temporary.write_text(json.dumps(scenario), encoding="utf-8")
        temporary.replace(self.scenario)

    def add_host_paths(self, *paths: str) -> None:
        for path in paths:
            target = self.host_root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()

    def driver_values(self, kubeconfig: Path) -> dict[str, Any]:
        """The settings that make a plugin this node's DRA driver, its Kubernetes publishers off."""
        return {
            "serve": "dra",
            "node_name": NODE,
            "kubeconfig": kubeconfig,
            "dra_registry_path": self.registry_dir,
            "dra_plugin_path": self.plugin_dir,
            "cdi_spec_dir": self.cdi_dir,
            "node_labels": False,
            "device_info_configmap": False,
            "node_events": False,
        }

    def settings(self, kubeconfig: Path, **overrides: Any) -> Settings:
        """Settings of a plugin serving this node as a DRA driver, fast intervals."""
        values: dict[str, Any] = {
            "backend": "fake",
            "fake_scenario": self.scenario,
            **self.driver_values(kubeconfig),
        }
        values.update(overrides)
        return fast_settings(self.root / "device-plugins", self.host_root, **values)

    def flags(self, kubeconfig: Path, **overrides: Any) -> list[str]:
        """The command-line flags of a plugin process serving this node as a DRA driver, telemetry off."""
        values = {**self.driver_values(kubeconfig), "telemetry": False, **overrides}
        flags = []
        for name, value in values.items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                flags.append(flag if value else flag.replace("--", "--no-", 1))
            else:
                flags += [flag, str(value)]
        return flags

    def spec_files(self) -> dict[str, dict[str, Any]]:
        """The CDI spec files in the CDI directory, by file name."""
        if not self.cdi_dir.exists():
            return {}
        return {path.name: json.loads(path.read_text()) for path in sorted(self.cdi_dir.glob("*.json"))}


def make_dra_node(root: Path, scenario: dict[str, Any]) -> DraNode:
    root.mkdir(parents=True, exist_ok=True)
    node = DraNode(root)
    node.write(scenario)
    phys = [chip["phy_id"] for chip in scenario["chips"]]
    node.add_host_paths(*(f"/dev/davinci{phy}" for phy in phys), "/dev/davinci_manager", "/dev/hisi_hdc")
    (node.host_root / "usr/local/Ascend/driver").mkdir(parents=True)
    return node


def result(
    device: str, request: str = "npus", *, driver: str = DRIVER, pool: str = NODE, **extra: Any
) -> dict[str, Any]:
    """One allocation result as the scheduler writes it."""
    return {"request": request, "driver": driver, "pool": pool, "device": device, **extra}


def put_claim(
    apiserver: FakeApiServer,
    name: str,
    results: Sequence[dict[str, Any]] | None,
    namespace: str = "default",
) -> tuple[str, str, str]:
    """A ResourceClaim with ``results`` as its allocation (None: not allocated); (namespace, name, uid)."""
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "npus", "exactly": {"deviceClassName": "ascend910.npu.huawei.com"}}]
            }
        },
    }
    if results is not None:
        claim["status"] = {"allocation": {"devices": {"results": list(results)}}}
    stored = apiserver.put("resourceclaims", claim)
    return namespace, name, stored["metadata"]["uid"]


def standin(node: DraNode, apiserver: FakeApiServer, **options: Any) -> DraKubeletStandIn:
    """A DRA kubelet stand-in on the node's registry directory, wiping through ``apiserver``."""
    options.setdefault("health_retry", 0.2)
    return DraKubeletStandIn(node.registry_dir, NODE, KubeletApi(apiserver.url, apiserver.token), **options)


@asynccontextmanager
async def running_driver(settings: Settings, **options: Any) -> AsyncIterator[PluginApp]:
    """A PluginApp with serve=dra (and ``options``) running in the background for the block.

    The driver publishes its slices once a kubelet has registered it: where the test started no DRA
    kubelet stand-in on the registry directory, one plays the kubelet's plugin watcher (registration
    only: no wipe, no health stream).
    """
    app = PluginApp(settings, **options)
    plugin_watcher = None
    if settings.dra_registry_path.resolve() not in DraKubeletStandIn.watching:
        plugin_watcher = DraKubeletStandIn(settings.dra_registry_path, NODE, health_stream=False)
        await anyio.to_thread.run_sync(plugin_watcher.start)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        try:
            yield app
        finally:
            app.stop()
            if plugin_watcher is not None:
                await anyio.to_thread.run_sync(plugin_watcher.stop)


def registered(kubelet: DraKubeletStandIn, times: int = 1) -> bool:
    return len([r for r in kubelet.registrations if r[0] == DRIVER]) >= times


def device_names(slices: Sequence[dict[str, Any]]) -> list[str]:
    """The devices of ``slices``, in slice then device order."""
    return [device["name"] for slice_ in slices for device in slice_["spec"].get("devices") or []]


async def prepare(
    kubelet: DraKubeletStandIn, *claims: tuple[str, str, str]
) -> v1.NodePrepareResourcesResponse:
    """NodePrepareResources through the kubelet stand-in (off the event loop)."""
    return await anyio.to_thread.run_sync(kubelet.prepare, DRIVER, list(claims))


async def unprepare(
    kubelet: DraKubeletStandIn, *claims: tuple[str, str, str]
) -> v1.NodeUnprepareResourcesResponse:
    """NodeUnprepareResources through the kubelet stand-in (off the event loop)."""
    return await anyio.to_thread.run_sync(kubelet.unprepare, DRIVER, list(claims))


def cel_device(device: dict[str, Any], driver: str) -> dict[str, Any]:
    """A published device as the scheduler's CEL sees it: ``driver``, attributes and capacity by domain.

    An attribute name without a domain belongs to the driver's domain.
    """
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, identifier = name.rpartition("/")
        ((_, typed),) = value.items()
        attributes.setdefault(domain or driver, {})[identifier] = typed
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, _, identifier = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[identifier] = value["value"]
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def cel_selects(expression: str, device: dict[str, Any], driver: str) -> bool:
    """Whether a CEL selector selects ``device``; an error is raised (it aborts the allocation)."""
    import celpy

    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    outcome = program.evaluate({"device": celpy.json_to_cel(cel_device(device, driver))})
    return outcome is True or (isinstance(outcome, celpy.celtypes.BoolType) and bool(outcome))


def server_inventory(directory: Path, chip_name: str, ai_cores: float, chips: int = 8) -> Inventory:
    """A healthy 910 server of ``chips`` chips, one per card, with the topology units discovery gives them."""
    family = family_named("910")
    table = family.TABLE
    info = ChipInfo(chip_type="Ascend", chip_name=chip_name, chip_ver="V1", aicore_cnt=0)
    found = [Chip(card_id=phy, device_id=0, logic_id=phy, phy_id=phy, info=info) for phy in range(chips)]
    units = assign_units(ChipFacts.of(chip, family.for_chip(info).unit_kind) for chip in found)
    healthy = Verdict(known=True, healthy=True, reason="")
    states = [ChipState(chip, healthy, ai_cores, unit=units[chip.phy_id]) for chip in found]
    return Inventory(NodeFacts(table, str(directory / "scenario.json"), "24.1.rc2"), states)


# An 8-core 24 GiB 310P3's partitions at every place they fit, by template: what a chip of a Duo publishes
# uncapped.
EVERY_PLACE_310P3 = {
    "vir01": 7,
    "vir02": 3,
    "vir02_1c": 4,
    "vir04": 1,
    "vir04_3c": 2,
    "vir04_3c_ndvpp": 2,
    "vir04_4c_dvpp": 1,
}


def split_inventory(
    directory: Path, family: str, chip_name: str, ai_cores: float, memory_mb: int, chips: int
) -> tuple[Inventory, dict[int, ChipSplits]]:
    """A healthy node of ``chips`` chips with their memory, and what its family splits each into."""
    from backends.families import family_for

    table = family_named(family).TABLE
    info = ChipInfo(chip_type="Ascend", chip_name=chip_name, chip_ver="V1", aicore_cnt=0)
    implementation = family_for(info).for_chip(info)
    found = [Chip(card_id=phy, device_id=0, logic_id=phy, phy_id=phy, info=info) for phy in range(chips)]
    units = assign_units(ChipFacts.of(chip, implementation.unit_kind) for chip in found)
    healthy = Verdict(known=True, healthy=True, reason="")
    states = [
        ChipState(chip, healthy, ai_cores, unit=units[chip.phy_id], memory_mb=memory_mb) for chip in found
    ]
    backend = implementation.__new__(implementation)  # the template tables need no library
    splits = {state.phy_id: backend.splits(state.chip, ai_cores, memory_mb) for state in states}
    inventory = Inventory(NodeFacts(table, str(directory / "scenario.json"), "24.1.rc2"), states)
    return inventory, {phy: found for phy, found in splits.items() if found is not None}


def as_slices(
    contents: Sequence[dict[str, Any]], driver: str = DRIVER, node: str = NODE
) -> list[dict[str, Any]]:
    """Slice contents (``devices.slice_contents``) as the whole ResourceSlices of one pool generation."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{driver}-{node}-{index}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": len(contents)},
                **content,
            },
        }
        for index, content in enumerate(contents)
    ]
