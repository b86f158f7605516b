"""The plugin's Kubernetes side: node labels, device-info ConfigMap, config reload, node Events.

Only :mod:`ascend_plugin.app` imports this package, lazily, after the first
kubelet registration and only when ``node_name`` is set: kubernetes-asyncio
costs tens of MB and most of a second to import, which a 4 GB edge board should
not pay before its NPU is served (or at all, with the kube features off).
Nothing outside this package imports kubernetes-asyncio.

Each part runs supervised in one task group and handles the API server's
moods itself (down, 403, 409, 410, 5xx) with backoff, so none of them can stall
or break the kubelet side, which never waits on anything here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from ascend_plugin.app import PluginApp
from ascend_plugin.kube.client import Kube, connect
from ascend_plugin.kube.config_watch import ConfigWatcher
from ascend_plugin.kube.device_info import DeviceInfoPublisher
from ascend_plugin.kube.errors import KubeError
from ascend_plugin.kube.events import NodeEvents
from ascend_plugin.kube.labels import NodeLabeller, plan_labels
from ascend_plugin.kube.retry import Retrier
from ascend_plugin.supervise import supervise

log = logging.getLogger(__name__)

__all__ = ["run_kube"]


class NotServing(RuntimeError):
    """run_kube was called before the plugin found its chips (a wiring bug)."""


async def run_kube(app: PluginApp) -> None:
    """Run every enabled Kubernetes part for ``app`` until cancelled."""
    settings = app.settings
    if app.node is None or app.registry is None or not settings.node_name:
        raise NotServing("the Kubernetes side starts only once the plugin serves its chips on a named node")
    node, registry, node_name = app.node, app.registry, settings.node_name
    kube = await _connect(app)
    unsubscribe: list[Callable[[], None]] = []
    try:
        async with anyio.create_task_group() as tasks:
            if settings.node_labels:
                labeller = NodeLabeller(kube, node_name, plan_labels(node, settings.label_prefix))
                tasks.start_soon(supervise, "node labels", labeller.run)
            if settings.device_info_configmap:
                publisher = DeviceInfoPublisher(
                    kube,
                    registry,
                    settings.device_info_namespace,
                    settings.device_info_name_prefix + node_name,
                    settings.device_info_refresh,
                )
                tasks.start_soon(supervise, "device-info ConfigMap", publisher.run)
            if settings.config_configmap:
                namespace = settings.config_configmap_namespace or settings.pod_namespace
                watcher = ConfigWatcher(kube, app, namespace, settings.config_configmap)
                tasks.start_soon(supervise, "config ConfigMap", watcher.run)
            if settings.node_events:
                events = NodeEvents(kube, node_name)
                unsubscribe.append(registry.on_transition(events.on_transition))
                tasks.start_soon(supervise, "node events", events.run)
    finally:
        for stop_listening in unsubscribe:
            stop_listening()
        with anyio.CancelScope(shield=True):
            await kube.close()


async def _connect(app: PluginApp) -> Kube:
    """A client, retrying with backoff while the configuration cannot be loaded."""
    retry = Retrier("Kubernetes client")
    while True:
        try:
            return await connect(app.settings.kubeconfig)
        except KubeError as error:
            await retry.failed(error)
