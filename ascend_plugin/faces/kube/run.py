"""run_kube: connect to the API server and run every enabled publisher."""

from __future__ import annotations

import functools
import logging

import anyio

from ascend_plugin.faces.kube.publishers import PUBLISHERS, KubeInputs, kube_side
from ascend_plugin.kubeapi.shared import SharedClient
from ascend_plugin.resilience import supervise

log = logging.getLogger(__name__)


async def run_kube(inputs: KubeInputs) -> None:
    """Run every enabled publisher until cancelled, on the process's client (``inputs.client``)."""
    client = inputs.client or SharedClient(inputs.settings.kubeconfig)
    async with client.use("Kubernetes client") as kube:
        side = kube_side(kube, inputs)
        async with anyio.create_task_group() as tasks:
            if inputs.settings.node_labels:  # the Node's one reader (its RBAC row grants list and watch)
                tasks.start_soon(supervise, "node reflector", side.node.run)
            for publisher in PUBLISHERS:
                if publisher.enabled(inputs.settings):
                    tasks.start_soon(supervise, publisher.name, publisher.build(side, inputs))
            announce = side.events.announce if side.events is not None else None
            for part in inputs.side_parts:
                tasks.start_soon(supervise, part.name, functools.partial(part.run, side.kube, announce))
