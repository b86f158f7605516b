"""The ResourceSlices the plugin publishes for a few representative nodes, taken from the driver itself.

The whole plugin runs in-process with ``serve=dra`` on fake chips, against the loopback stand-in
playing the session's release, as the DRA unit tests run it: its feature probes, its layout, its
taints and its own spelling of every quantity are the product's, none rebuilt here. Once the pool
is in sync a chip faults, and once that is published too, what the driver sent is kept: the
probes' dry runs, and for each slice of the pool the last body written to it (as a create). The
same requests then go to the real API server and to the stand-in (test_slice_admission.py).
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from dra_harness import A1_SERVER, A2_SERVER, DRIVER, DUO_SERVER, NODE, make_dra_node, running_driver
from fake_apiserver import FakeApiServer
from waiting import until

from ascend_plugin.app import PluginApp

Obj = dict[str, Any]
FAULTED = 3  # the chip that faults once the pool is published
FAULT = "80E01801"  # SeparateNPU: a tainted device where taints are kept, else it leaves the pool
CAPTURE_WITHIN = 120.0  # seconds for the driver to publish (a loaded 2-core machine)


def _server(chip_name: str, aicore: float, memory_mb: int, chips: int) -> Obj:
    return {
        "chip_name": chip_name,
        "aicore": aicore,
        "memory_mb": memory_mb,
        "chips": [{"phy_id": phy, "card_id": phy, "device_id": 0} for phy in range(chips)],
    }


@dataclass(frozen=True)
class Node:
    """A node the plugin publishes: its fake chips and the settings that shape the pool."""

    name: str
    scenario: Mapping[str, Any]
    settings: Mapping[str, Any] = field(default_factory=dict)


NODES = {
    node.name: node
    for node in (
        Node("910B3 x8, whole chips", A2_SERVER),
        Node("910B3 x8, vNPUs on demand", A2_SERVER, {"vnpu": "dynamic"}),
        Node("300I Duo, vNPUs on demand", DUO_SERVER, {"vnpu": "dynamic"}),
        Node("300I Duo, chips shared by 4", DUO_SERVER, {"share_count": 4}),
        Node("910A x8, vNPUs on demand", A1_SERVER, {"vnpu": "dynamic"}),
        Node("910B4 x8, vNPUs on demand", _server("910B4", 20.0, 32768, 8), {"vnpu": "dynamic"}),
        Node("910B2 x16, vNPUs on demand", _server("910B2", 24.0, 65536, 16), {"vnpu": "dynamic"}),
        Node("310P3 x8, vNPUs on demand", _server("310P3", 8.0, 24576, 8), {"vnpu": "dynamic"}),
    )
}


@dataclass(frozen=True)
class Publication:
    """What the driver sent: its probes (dry runs), and the pool's slices as they were last written."""

    probes: list[Obj]
    slices: list[Obj]


def publication(node: Node, version: str) -> Publication:
    """Run the driver for ``node`` against the stand-in playing ``version``; what it sent."""
    with tempfile.TemporaryDirectory(prefix="adp-capture-", dir="/tmp") as root:
        return anyio.run(_publish, node, version, Path(root))


def _devices(apiserver: FakeApiServer) -> dict[str, Obj]:
    return {d["name"]: d for s in apiserver.slices(DRIVER, NODE) for d in s["spec"].get("devices") or []}


def _in_sync(app: PluginApp) -> bool:
    return app.dra is not None and app.dra.slices is not None and app.dra.slices.in_sync


async def _publish(node: Node, version: str, root: Path) -> Publication:
    async with FakeApiServer(kube_version=version) as apiserver:
        apiserver.add_node(NODE)
        dra_node = make_dra_node(root / "node", dict(node.scenario))
        settings = dra_node.settings(apiserver.write_kubeconfig(root / "kubeconfig"), **node.settings)
        faulted = f"npu-{FAULTED}"
        async with running_driver(settings) as app:

            def fault_published() -> bool:
                """The faulted chip tainted (where taints are kept) or gone from the pool."""
                device = _devices(apiserver).get(faulted)
                return _in_sync(app) and (device is None or "taints" in device)

            await until(
                lambda: _in_sync(app) and faulted in _devices(apiserver), "published", within=CAPTURE_WITHIN
            )
            dra_node.set_faults({FAULTED: [FAULT]})
            await until(fault_published, "the fault published", within=CAPTURE_WITHIN)
        return Publication(_probes(apiserver), _last_written(apiserver))


def _probes(apiserver: FakeApiServer) -> list[Obj]:
    return [copy.deepcopy(r.body) for r in apiserver.requests_of("create", "resourceslices", dry_run=True)]


def _last_written(apiserver: FakeApiServer) -> list[Obj]:
    """Each slice of the pool as last written: its last update, or the create that made it."""
    creates = [r for r in apiserver.requests_of("create", "resourceslices") if r.status == 201]
    made = [
        c.object["metadata"]["name"]
        for c in apiserver.history
        if c.resource == "resourceslices" and c.type == "ADDED"
    ]
    assert len(creates) == len(made), "every create stored one slice"
    last = {name: request.body for name, request in zip(made, creates, strict=True)}
    last |= {r.name: r.body for r in apiserver.requests_of("update", "resourceslices") if r.status == 200}
    bodies = []
    for stored in apiserver.slices(DRIVER, NODE):
        sent = copy.deepcopy(last[stored["metadata"]["name"]])
        owners = sent["metadata"].get("ownerReferences")
        sent["metadata"] = {"generateName": f"{DRIVER}-{NODE}-", "ownerReferences": owners}
        bodies.append(sent)
    return bodies
