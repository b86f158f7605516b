"""Annotation patches of pods, written in the background and retried until they land.

Patches of one pod merge while they wait; each names the pod's UID as a
precondition (a pod re-created under the same name never gets another's chips).
A pod that is gone (404, 409) drops its patch; other failures are retried with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio

from ascend_plugin.faces.volcano.pods import Pod
from ascend_plugin.kubeapi.client import PODS, Kube
from ascend_plugin.kubeapi.errors import Conflict, KubeError, NotFound
from ascend_plugin.kubeapi.retry import Retrier

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    namespace: str
    name: str
    annotations: dict[str, str] = field(default_factory=dict)


class PodPatcher:
    """Writes the annotations asked for, pod by pod, until each patch lands."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._wake = anyio.Event()
        self.written = 0  # patches that landed

    def pending(self, uid: str) -> Mapping[str, str]:
        """The annotations still to be written on the pod with ``uid``."""
        entry = self._pending.get(uid)
        return dict(entry.annotations) if entry else {}

    def want(self, pod: Pod, annotations: Mapping[str, str]) -> None:
        """Have ``annotations`` written on ``pod`` as soon as the API server takes them."""
        entry = self._pending.setdefault(pod.uid, _Pending(pod.namespace, pod.name))
        entry.annotations.update(annotations)
        self._wake.set()

    async def run(self, kube: Kube) -> None:
        retry = Retrier("pod annotations")
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._pending:
                uid = next(iter(self._pending))
                entry = self._pending.pop(uid)
                try:
                    await self._patch(kube, uid, entry)
                except (NotFound, Conflict) as error:
                    log.info(
                        "pod %s/%s is gone; its annotations are dropped (%s)",
                        entry.namespace,
                        entry.name,
                        error,
                    )
                except KubeError as error:
                    self._requeue(uid, entry)
                    await retry.failed(error)
                    continue
                retry.succeeded()

    async def _patch(self, kube: Kube, uid: str, entry: _Pending) -> None:
        body: dict[str, object] = {"metadata": {"uid": uid, "annotations": dict(entry.annotations)}}
        await kube.patch(PODS, entry.name, entry.namespace, body)
        self.written += 1
        log.info(
            "pod %s/%s annotated: %s",
            entry.namespace,
            entry.name,
            ", ".join(sorted(entry.annotations)),
            extra={"pod": f"{entry.namespace}/{entry.name}", "annotations": sorted(entry.annotations)},
        )

    def _requeue(self, uid: str, entry: _Pending) -> None:
        """Put a failed patch back, under anything asked for it since."""
        newer = self._pending.pop(uid, None)
        if newer is not None:
            entry.annotations.update(newer.annotations)
        self._pending[uid] = entry
