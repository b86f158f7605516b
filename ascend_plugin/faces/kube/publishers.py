"""The Kubernetes publishers as one table: what each does, when it runs, what RBAC it needs.

The table starts them (:func:`run_kube`), tells ``doctor`` which permissions to ask about, and is what
the chart's RBAC is checked against: a new publisher is a row and its module.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ascend_plugin.fault_policy.config import CONFIGMAP_NAMESPACE as FAULT_CONFIG_NAMESPACE
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.shared import SharedClient
from ascend_plugin.live_config import LiveConfig
from ascend_plugin.offers.node_offers import Notice
from ascend_plugin.resilience import supervise
from ascend_plugin.settings import Settings
from backends.families import FamilyTable

if TYPE_CHECKING:  # the publishers' modules import kubernetes-asyncio: only the builders load them
    from ascend_plugin.faces.kube.events import NodeEvents
    from ascend_plugin.kubeapi.client import JsonObject, Kube
    from ascend_plugin.kubeapi.reflector import Reflector

Part = Callable[[], Awaitable[None]]
Announce = Callable[[str, str], None]  # a one-off node Event: (reason, message)

# Node events live in the default namespace, where the kubelet puts its own and
# where `kubectl describe node` finds them.
EVENT_NAMESPACE = "default"


@dataclass(frozen=True)
class KubeInputs:
    settings: Settings  # as the plugin started
    node_name: str
    config: LiveConfig
    inventory: Inventory
    faults: FaultSources  # the fault configuration's inputs and the node's fault policy
    held: HeldChips | None = None  # chips held (PodResources, every mode); Volcano mode: off the free list
    notices: tuple[Notice, ...] = ()  # start-up warnings about the offers, each posted as a node Event
    hot_reset: HotResetManager | None = None  # hot_reset on: what the ResetInfo annotation and Events tell
    # Parts of other faces that read the API server and tell through the node's Events (app.py wires them).
    side_parts: tuple[SidePart, ...] = ()
    client: SharedClient | None = None  # the process's API client (None: one of their own)


@dataclass(frozen=True)
class SidePart:
    """Another face's part run on the publishers' client, announcing through their one Event sender."""

    name: str
    run: Callable[[Kube, Announce | None], Awaitable[None]]


@dataclass(frozen=True)
class KubeSide:
    """What the publishers share: the API client, our Node's reflector (run while the node labels, its
    reader, are on), the Event sender (None: events off)."""

    kube: Kube
    events: NodeEvents | None
    node: Reflector[JsonObject]


@dataclass(frozen=True)
class Grant:
    """Verbs on a core-group resource, in a namespace (None: cluster-scoped)."""

    resource: str
    namespace: str | None
    verbs: tuple[str, ...]
    without: str | None = None  # what the plugin does when refused; None: it needs the grant


def stale_resource_grants(table: FamilyTable) -> tuple[Grant, ...]:
    """A family with an older family's leftover resources (the 950's huawei.com/Ascend910) removes them
    from its Node's status; refused, the plugin logs the command instead (rbac.removeStaleResources)."""
    if not table.stale_resources:
        return ()
    without = f"{', '.join(table.stale_resources)} left on the node is said with the command, not removed"
    return (Grant("nodes/status", None, ("patch",), without),)


@dataclass(frozen=True)
class Publisher:
    """One Kubernetes publisher: its setting, the permissions it needs, how to start it."""

    name: str
    setting: str  # the Settings field that turns it on
    grants: Callable[[Settings], tuple[Grant, ...]]
    build: Callable[[KubeSide, KubeInputs], Part]
    family_grants: Callable[[FamilyTable], tuple[Grant, ...]] = lambda table: ()  # what a family adds

    def enabled(self, settings: Settings) -> bool:
        return bool(getattr(settings, self.setting))


def kube_side(kube: Kube, inputs: KubeInputs) -> KubeSide:
    """The shared parts of the publishers of ``inputs``: one Event sender for the node, if it posts any."""
    from ascend_plugin.faces.kube.events import NodeEvents
    from ascend_plugin.faces.kube.labels import node_reflector

    events = None
    if inputs.settings.node_events:
        events = NodeEvents(kube, inputs.node_name, inputs.inventory.table, EVENT_NAMESPACE)
    return KubeSide(kube, events, node_reflector(kube, inputs.node_name))


def _labels(side: KubeSide, inputs: KubeInputs) -> Part:
    from ascend_plugin.faces.kube.labels import NodeLabeller, plan_labels

    plan = plan_labels(inputs.inventory, inputs.settings.label_prefix)
    return NodeLabeller(side.kube, side.node, inputs.node_name, plan, side.events).run


def _device_info(side: KubeSide, inputs: KubeInputs) -> Part:
    from ascend_plugin.faces.kube.device_info import DeviceInfoPublisher

    settings = inputs.settings
    return DeviceInfoPublisher(
        side.kube,
        inputs.inventory,
        settings.device_info_namespace,
        settings.device_info_name_prefix + inputs.node_name,
        settings.device_info_refresh,
        held=inputs.held,
        policy=inputs.faults.policy,
        announce=side.events.announce if side.events is not None else None,
    ).run


def config_namespace(settings: Settings) -> str:
    return settings.config_configmap_namespace or settings.pod_namespace


def _config(side: KubeSide, inputs: KubeInputs) -> Part:
    from ascend_plugin.faces.kube.config_watch import ConfigWatcher

    assert inputs.settings.config_configmap is not None  # enabled only when set
    return ConfigWatcher(
        side.kube,
        inputs.config,
        inputs.faults,
        config_namespace(inputs.settings),
        inputs.settings.config_configmap,
    ).run


def _fault_config(side: KubeSide, inputs: KubeInputs) -> Part:
    from ascend_plugin.faces.kube.config_watch import FaultConfigWatcher

    return FaultConfigWatcher(side.kube, inputs.faults).run


def _events(side: KubeSide, inputs: KubeInputs) -> Part:
    """Post the node's Events: chip transitions and start-up notices here, the other publishers' too."""
    events = side.events
    assert events is not None  # kube_side builds the sender whenever node_events is on
    for notice in inputs.notices:
        events.announce(notice.reason, notice.message)

    return lambda: events.serve(inputs.inventory, inputs.faults.policy)


def _hot_reset(side: KubeSide, inputs: KubeInputs) -> Part:
    from ascend_plugin.faces.kube.reset_info import HotResetPublisher

    assert inputs.hot_reset is not None  # the app builds the manager whenever hot_reset is on
    return HotResetPublisher(side.kube, inputs.node_name, inputs.hot_reset, side.events).run


def _hot_reset_grants(settings: Settings) -> tuple[Grant, ...]:
    node = Grant("nodes", None, ("get", "patch"))
    return (node, Grant("events", EVENT_NAMESPACE, ("create",))) if settings.node_events else (node,)


PUBLISHERS: tuple[Publisher, ...] = (
    Publisher(
        "node labels",
        "node_labels",
        lambda s: (Grant("nodes", None, ("list", "watch", "patch")),),
        _labels,
        stale_resource_grants,
    ),
    Publisher(
        "device-info ConfigMap",
        "device_info_configmap",
        lambda s: (
            Grant("configmaps", s.device_info_namespace, ("get", "list", "watch", "create", "update")),
        ),
        _device_info,
    ),
    Publisher(
        "fault configuration ConfigMap",
        "fault_config_configmap",
        lambda s: (Grant("configmaps", FAULT_CONFIG_NAMESPACE, ("get", "list", "watch")),),
        _fault_config,
    ),
    Publisher(
        "config ConfigMap",
        "config_configmap",
        lambda s: (Grant("configmaps", config_namespace(s), ("list", "watch")),),
        _config,
    ),
    Publisher(
        "node events",
        "node_events",
        lambda s: (Grant("nodes", None, ("get",)), Grant("events", EVENT_NAMESPACE, ("create",))),
        _events,
    ),
    Publisher("hot reset: ResetInfo annotation and Events", "hot_reset", _hot_reset_grants, _hot_reset),
)


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
