"""run_kube: connect to the API server and run every enabled publisher."""

from __future__ import annotations

import logging

import anyio

from ascend_plugin.faces.kube.publishers import PUBLISHERS, KubeInputs
from ascend_plugin.kubeapi.client import Kube, connect
from ascend_plugin.kubeapi.errors import KubeError
from ascend_plugin.kubeapi.retry import Retrier
from ascend_plugin.resilience import supervise

log = logging.getLogger(__name__)


async def run_kube(inputs: KubeInputs) -> None:
    """Run every enabled publisher until cancelled."""
    kube = await _connect(inputs)
    try:
        async with anyio.create_task_group() as tasks:
            for publisher in PUBLISHERS:
                if publisher.enabled(inputs.settings):
                    tasks.start_soon(supervise, publisher.name, publisher.build(kube, inputs))
    finally:
        with anyio.CancelScope(shield=True):
            await kube.close()


async def _connect(inputs: KubeInputs) -> Kube:
    """A client, retrying with backoff while the configuration cannot be loaded."""
    retry = Retrier("Kubernetes client")
    while True:
        try:
            return await connect(inputs.settings.kubeconfig)
        except KubeError as error:
            await retry.failed(error)
