"""An older family's extended resources left on our Node (``huawei.com/Ascend910`` on a 950 node, from a
plugin that named its chips so) are removed from the Node's status, as Huawei's plugin removes them.

One JSON patch of the ``nodes/status`` subresource removes them from capacity and allocatable, each
removal after a ``test`` of the value seen: a resource that changed meanwhile is refused (422) and judged
again, while the many other writes to the Node (the kubelet's status, labels) never get in the way, as a
resourceVersion precondition would. Without the right (403: the chart's rbac.removeStaleResources off)
the operator is told the command once. A resource put back again and again (a plugin the kubelet still
has registered for it) is left alone after a few removals, and said. docs/kubernetes.md, "Node labels".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ascend_plugin.kubeapi.client import NODE_STATUS, JsonObject, Kube
from ascend_plugin.kubeapi.errors import Forbidden
from ascend_plugin.kubeapi.reflector import Reflector

if TYPE_CHECKING:
    from ascend_plugin.faces.kube.events import NodeEvents

log = logging.getLogger(__name__)

REMOVED_REASON = "LeftoverResourceRemoved"
PARTS = ("capacity", "allocatable")
# The kubelet puts a removed resource back once, at 0, when it forgets a stopped plugin (5 minutes after
# it stopped): that one is removed again. More than this many removals is a fight, and the plugin stops.
MAX_REMOVALS = 3


def _pointer(part: str, resource: str) -> str:
    """The JSON pointer of ``resource`` in the status ``part`` (RFC 6901: '~' is ~0, '/' is ~1)."""
    return f"/status/{part}/" + resource.replace("~", "~0").replace("/", "~1")


def leftovers(node: Mapping[str, object], resources: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Of ``resources``, those the node's status still has: each with its value in capacity, allocatable."""
    status = node.get("status")
    found: dict[str, dict[str, str]] = {}
    for part in PARTS:
        listed = status.get(part) if isinstance(status, Mapping) else None
        if not isinstance(listed, Mapping):
            continue
        for resource in resources:
            if isinstance(value := listed.get(resource), str):
                found.setdefault(resource, {})[part] = value
    return found


def _said(values: Mapping[str, str]) -> str:
    return ", ".join(f"{part} {value}" for part, value in values.items())


class StaleResources:
    """Removes an older family's extended resources from our Node's status, each time a change shows one."""

    def __init__(
        self,
        kube: Kube,
        node: Reflector[JsonObject],
        node_name: str,
        resources: tuple[str, ...],
        events: NodeEvents | None = None,
    ) -> None:
        self.kube = kube
        self.node = node
        self.node_name = node_name
        self.resources = resources
        self.events = events
        self._removals: Counter[str] = Counter()
        self._left: set[str] = set()  # said and left alone: refused, or put back too often

    async def remove(self, node: Mapping[str, object]) -> None:
        """Remove those of our resources ``node`` (as last seen) still has; a 403 is said with the command
        instead, any other KubeError is raised (the caller retries with backoff)."""
        found = {
            resource: values
            for resource, values in leftovers(node, self.resources).items()
            if resource not in self._left
        }
        for resource in [resource for resource in found if self._removals[resource] >= MAX_REMOVALS]:
            self._leave(resource, found.pop(resource))
        if not found:
            return
        operations: list[JsonObject] = []
        for resource, values in found.items():
            for part, value in values.items():
                path = _pointer(part, resource)
                operations += [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
        try:
            await self.node.record_write(self.kube.json_patch(NODE_STATUS, self.node_name, None, operations))
        except Forbidden as error:
            for resource, values in found.items():
                self._refused(resource, values, error)
            return
        self._removals.update(found.keys())
        what = "; ".join(f"{resource} ({_said(values)})" for resource, values in sorted(found.items()))
        log.info(
            "node %s: removed from its status what an older family's plugin left: %s",
            self.node_name,
            what,
            extra={"node": self.node_name, "resources": sorted(found)},
        )
        if self.events is not None:
            self.events.announce(
                REMOVED_REASON,
                f"removed from the node's capacity and allocatable, left over from an older family's "
                f"plugin: {what}",
                "Normal",
            )

    def _refused(self, resource: str, values: Mapping[str, str], error: Forbidden) -> None:
        self._left.add(resource)
        log.warning(
            "node %s still advertises %s (%s), left over from an older family's plugin; Huawei's plugin "
            "removes it at start, this one was refused the node's status (%s; the chart grants it with "
            "rbac.removeStaleResources). Remove it once: %s",
            self.node_name,
            resource,
            _said(values),
            error.message,
            self.command(resource, values),
            extra={"node": self.node_name, "resource": resource},
        )

    def _leave(self, resource: str, values: Mapping[str, str]) -> None:
        self._left.add(resource)
        log.warning(
            "node %s: %s is back in its status (%s) after %d removals: something keeps putting it back, "
            "most likely a device plugin the kubelet still has registered for it; it is left alone. Stop "
            "that plugin, then remove it once: %s",
            self.node_name,
            resource,
            _said(values),
            self._removals[resource],
            self.command(resource, values),
            extra={"node": self.node_name, "resource": resource},
        )

    def command(self, resource: str, values: Mapping[str, str]) -> str:
        """The kubectl command that removes ``resource`` from where ``values`` says it is."""
        removals = ",".join(f'{{"op":"remove","path":"{_pointer(part, resource)}"}}' for part in values)
        return f"kubectl patch node {self.node_name} --subresource=status --type=json -p '[{removals}]'"
