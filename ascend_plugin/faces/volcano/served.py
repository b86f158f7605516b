"""The pods this plugin served since it started: which kubelet IDs and chips each Allocate named.

The annotation writer prefers the kubelet's own record (PodResources) of which
pod holds which kubelet IDs; where the kubelet cannot be asked, this is what it
has. It also counts chips as held from the moment they are handed over, before
any annotation says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_plugin.faces.volcano.pods import Pod


@dataclass(frozen=True)
class Served:
    """One pod's Allocate: the kubelet's IDs and the chips handed over for them."""

    pod: Pod
    kubelet_ids: tuple[str, ...]
    real_ids: tuple[str, ...]


class ServedPods:
    """Served records by pod UID; dropped when the pod is gone or finished."""

    def __init__(self) -> None:
        self._served: dict[str, Served] = {}

    def add(self, served: Served) -> None:
        self._served[served.pod.uid] = served

    def get(self, uid: str) -> Served | None:
        return self._served.get(uid)

    def all(self) -> list[Served]:
        return list(self._served.values())

    def keep_only(self, active_uids: set[str]) -> None:
        """Forget the pods that are no longer active on this node."""
        for uid in set(self._served) - active_uids:
            del self._served[uid]
