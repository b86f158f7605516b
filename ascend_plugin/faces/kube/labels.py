"""Node labels: Huawei's (``accelerator``, chip name, ``servertype``, driver version) and our own two.

``servertype`` is set only while the node has none (others put their own there); the rest are put back
when removed or changed. docs/kubernetes.md, "Node labels".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascend_plugin.faces.kube.stale_resources import StaleResources
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import NODES, JsonObject, Kube, labels_of
from ascend_plugin.kubeapi.reflector import Reflector, named_object, object_key
from ascend_plugin.kubeapi.retry import Retrier

if TYPE_CHECKING:
    from ascend_plugin.faces.kube.events import NodeEvents

log = logging.getLogger(__name__)

ACCELERATOR = "accelerator"
CHIP_NAME = "node.kubernetes.io/npu.chip.name"
SERVER_TYPE = "servertype"
DRIVER_VERSION = "huawei.com/driver.version"

MAX_NAME = 63
MAX_PREFIX = 253
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NOT_ALLOWED = re.compile(r"[^-A-Za-z0-9_.]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")

VALUE_RULE = (
    "a label value is at most 63 characters of letters, digits, '-', '_' and '.', "
    "beginning and ending with a letter or digit"
)
KEY_RULE = (
    "a label key is an optional DNS subdomain prefix (at most 253 characters) and '/', "
    "then a name of at most 63 characters of letters, digits, '-', '_' and '.', "
    "beginning and ending with a letter or digit"
)


def value_is_valid(value: str) -> bool:
    """Whether ``value`` is a valid label value (empty counts as valid)."""
    return value == "" or (len(value) <= MAX_NAME and bool(_NAME.match(value)))


def key_is_valid(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (0 < len(prefix) <= MAX_PREFIX and _PREFIX.match(prefix)):
        return False
    return 0 < len(name) <= MAX_NAME and bool(_NAME.match(name))


def sanitise_value(value: str) -> str:
    """``value`` rewritten into label syntax: runs of other characters become '-', cut to 63."""
    return _EDGE.sub("", _EDGE.sub("", _NOT_ALLOWED.sub("-", value))[:MAX_NAME])


@dataclass(frozen=True)
class LabelPlan:
    enforced: Mapping[str, str]  # put back whenever removed or changed
    if_absent: Mapping[str, str]  # set only while the node has no such label
    stale_resources: tuple[str, ...] = ()  # an older family's extended resources this node should not have

    def patch_for(self, current: Mapping[str, str]) -> dict[str, str]:
        """The labels to send so that ``current`` follows the plan (empty when it already does)."""
        patch = {key: value for key, value in self.enforced.items() if current.get(key) != value}
        patch.update({key: value for key, value in self.if_absent.items() if key not in current})
        return patch


def _checked(key: str, value: str) -> str | None:
    """``value`` if the label is valid, a sanitised value, or None (each fix or skip logged)."""
    if not key_is_valid(key):
        log.warning("label %r is not set: the key is invalid (%s)", key, KEY_RULE, extra={"label": key})
        return None
    if value_is_valid(value):
        return value
    fixed = sanitise_value(value)
    if fixed:
        log.warning(
            "label %s: value %r is not valid (%s); using %r instead",
            key,
            value,
            VALUE_RULE,
            fixed,
            extra={"label": key, "value": value},
        )
        return fixed
    log.warning(
        "label %s is not set: value %r is not valid (%s) and nothing usable remains of it",
        key,
        value,
        VALUE_RULE,
        extra={"label": key, "value": value},
    )
    return None


def plan_labels(inventory: Inventory, label_prefix: str) -> LabelPlan:
    """The labels for the node of ``inventory``; invalid values sanitised or left out (a warning each).
    ``servertype`` and ``ai-cores`` use the smallest per-chip AI-core count (none read: left out)."""
    table = inventory.table
    enforced = {
        ACCELERATOR: table.accelerator_label,
        CHIP_NAME: inventory.chip_name,
        f"{label_prefix}/chip-count": str(len(inventory.chips())),
    }
    if inventory.facts.driver_version:
        enforced[DRIVER_VERSION] = inventory.facts.driver_version
    if_absent: dict[str, str] = {}
    if ai_cores := inventory.ai_cores():
        cores = f"{min(ai_cores.values()):g}"  # 1 rather than 1.0, 24.5 stays 24.5
        enforced[f"{label_prefix}/ai-cores"] = cores
        (enforced if table.server_type_enforced else if_absent)[SERVER_TYPE] = table.server_type(cores)
    else:
        log.info("no chip's AI-core count is known: the servertype and ai-cores labels are not set")
    memories = [state.memory_mb for state in inventory.chips() if state.memory_mb]
    enforced |= table.topology_labels_of(min(memories, default=None), inventory.facts.super_pod)

    def valid(labels: Mapping[str, str]) -> dict[str, str]:
        checked = {key: _checked(key, value) for key, value in labels.items()}
        return {key: value for key, value in checked.items() if value is not None}

    return LabelPlan(valid(enforced), valid(if_absent), table.stale_resources)


def node_reflector(kube: Kube, node_name: str) -> Reflector[JsonObject]:
    """Our Node's reflector: one per process, run by its owner; its log lines name its reader, the labels."""
    return named_object(kube, NODES, None, node_name, part="node labels")


class NodeLabeller:
    """Keeps our labels on our Node: each change ``node`` (its reflector, run elsewhere) shows is checked,
    and an older family's extended resources left in its status are removed (:mod:`.stale_resources`)."""

    def __init__(
        self,
        kube: Kube,
        node: Reflector[JsonObject],
        node_name: str,
        plan: LabelPlan,
        events: NodeEvents | None = None,
    ) -> None:
        self.kube = kube
        self.node = node
        self.node_name = node_name
        self.plan = plan
        self.stale = StaleResources(kube, node, node_name, plan.stale_resources, events)

    async def run(self) -> None:
        """Check the labels after each change of the node, forever; a failed patch is retried with backoff."""
        retry = Retrier("node labels")
        key = object_key(None, self.node_name)
        await self.node.wait_synced()
        while True:
            seen = self.node.changes.version
            await retry.until_answered(lambda: self._reconcile(self.node.get(key)))
            await self.node.changes.wait_for_change(seen)

    async def _reconcile(self, node: Mapping[str, object] | None) -> None:
        if node is None:
            log.warning(
                "node %s does not exist; its labels are set once it does (is NODE_NAME right?)",
                self.node_name,
                extra={"node": self.node_name},
            )
            return
        if patch := self.plan.patch_for(labels_of(node)):
            await self.node.record_write(
                self.kube.patch(NODES, self.node_name, None, {"metadata": {"labels": patch}})
            )
            log.info(
                "node %s: labels set: %s",
                self.node_name,
                ", ".join(f"{key}={value}" for key, value in sorted(patch.items())),
                extra={"labels": patch},
            )
        await self.stale.remove(node)  # the status as seen: each removal tests its value first
