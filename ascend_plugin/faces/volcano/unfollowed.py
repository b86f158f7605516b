"""Volcano's choices this plugin does not follow: Volcano places NPU pods here while Volcano mode is off.

Such a pod gets the kubelet's pick, not Volcano's, and no rank table. With the
device-info ConfigMap on, each pod holding this node's chips is read once; one
carrying Volcano's allocation is a warning, a node Event and a line in /readyz
until it ends (never refused: which Allocate is its own cannot be told).
docs/volcano.md#volcano-mode-off-but-volcano-schedules-here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascend_plugin.faces.volcano.pods import PREDICATE_TIME, parse_pod
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.kubeapi.client import PODS, JsonObject
from ascend_plugin.settings import how_to_set

if TYPE_CHECKING:
    from ascend_plugin.kubeapi.client import Kube

log = logging.getLogger(__name__)

REASON = "VolcanoModeOff"  # the node Event's reason
VOLCANO_DOC = "docs/volcano.md#volcano-mode-off-but-volcano-schedules-here"


@dataclass(frozen=True)
class Unfollowed:
    """A pod Volcano chose chips for, served by the kubelet's pick."""

    pod: str  # namespace/name
    resource: str
    chosen: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.pod} ({self.resource}: Volcano chose {','.join(self.chosen)})"


def volcano_choice(obj: JsonObject, resources: Collection[str]) -> Unfollowed | None:
    """Volcano's allocation on an active pod, for one of ``resources``; None when it carries none."""
    pod = parse_pod(obj)
    if not pod.active or pod.deleting or PREDICATE_TIME not in pod.annotations:
        return None
    for resource in sorted(resources):
        if chosen := pod.chosen(resource):
            return Unfollowed(pod.key, resource, chosen)
    return None


def problem(found: Collection[Unfollowed]) -> str:
    """What /readyz and doctor say while such pods run."""
    pods = "; ".join(each.describe() for each in sorted(found, key=lambda each: each.pod))
    return (
        f"Volcano chose the chips of pods on this node, but Volcano mode is off, so each got the kubelet's "
        f"pick and no rank table: {pods}. Set {how_to_set('volcano', True)} if Volcano schedules this "
        f"node's NPU jobs (Huawei's -volcanoType=true), see {VOLCANO_DOC}"
    )


Announce = Callable[[str, str], None]


class UnfollowedChoices:
    """Reads each pod holding the node's chips once, and says which carry Volcano's allocation."""

    def __init__(self, held: HeldChips, resources: Collection[str]) -> None:
        self.held = held
        self.resources = frozenset(resources)
        self.found: dict[str, Unfollowed] = {}  # by namespace/name, while the pod holds chips
        self._read: set[str] = set()  # pods read already (namespace/name)
        self._refused = ""  # the API server's refusal, said once; the check is off from then on

    def problems(self) -> list[str]:
        """One line while pods Volcano chose chips for run here; none otherwise."""
        return [problem(self.found.values())] if self.found else []

    async def run(self, kube: Kube, announce: Announce | None) -> None:
        """Follow the pods holding chips until cancelled (or refused the right to read them)."""
        from ascend_plugin.kubeapi.errors import Forbidden, KubeError, NotFound
        from ascend_plugin.kubeapi.retry import Retrier

        retry = Retrier("Volcano choices check")
        version = -1
        while not self._refused:
            holders = {
                f"{held.ref.namespace}/{held.ref.pod}"
                for held in self.held.containers()
                if any(device.resource in self.resources for device in held.devices)
            }
            for gone in set(self.found) - holders:
                del self.found[gone]
            self._read &= holders
            for key in sorted(holders - self._read):
                namespace, _, name = key.partition("/")
                try:
                    obj = await kube.get(PODS, name, namespace)
                except NotFound:
                    self._read.add(key)
                    continue
                except Forbidden as refused:
                    self._refused = str(refused)
                    log.warning("Volcano's choices are not checked: %s", refused)
                    return
                except KubeError as error:
                    await retry.failed(error)
                    break
                retry.succeeded()
                self._read.add(key)
                if (choice := volcano_choice(obj, self.resources)) is not None:
                    self._said(choice, announce)
            else:
                version = await self.held.wait_for_change(version)

    def _said(self, choice: Unfollowed, announce: Announce | None) -> None:
        self.found[choice.pod] = choice
        message = problem([choice])
        log.warning("%s", message, extra={"pod": choice.pod, "resource": choice.resource})
        if announce is not None:
            announce(REASON, message)
