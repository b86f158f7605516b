"""Refused: every request the plugin does not serve, and the one place its gRPC status is decided.

A kubelet-facing socket refuses for many causes: bytes no kubelet sends, a
peer that is not the kubelet, device IDs this node does not offer, a device
that turned unhealthy, a scheduler's choice that names no chip here, a claim
allocated on another node. Each is raised as the :class:`Refused` category
that says what the caller can do about it (fix the request, wait for the node,
retry), and the category alone decides the gRPC status (:data:`STATUSES`), as
grpclib's one ``GRPCError`` carries the status for every method: no service
picks a status of its own.

Every refusal carries

* ``label``: a fixed word for the cause (``malformed``, ``unhealthy``,
  ``no-candidate``, ``api``, ...): the ``reason`` label of the metrics that
  count refusals and the ``reason`` field of the line that logs one;
* ``reason``: what was wrong, the value, and what is allowed, in words the
  operator reads in the pod's events; it becomes the status message, cut to
  fit 4 KiB (:mod:`.status`), in :func:`grpc_error`, which the guarded server
  (:mod:`.server`) applies to whatever a service raises.

A new refusal raises the category that fits, with a label of its own where the
metrics should count it apart. A new category is a subclass of ``Refused`` and
its row in :data:`STATUSES`; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from grpclib import GRPCError
from grpclib.const import Status

from ascend_plugin.grpc_guard.status import capped


class Refused(Exception):
    """Root of the refusals: a request, or one claim of a request, that the plugin does not serve.

    What belongs here: anything a caller (the kubelet, a peer on a socket)
    asked that cannot be given, said in a sentence it can act on. Not here:
    the plugin's own failures (a chip that does not answer is a ``ChipError``,
    the API server away a ``KubeError``); the part that asked turns them into
    a refusal where the caller must hear of them. Raise a category below, not
    this root: the category decides the status.
    """

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(reason)
        self.label = label
        self.reason = reason

    @property
    def status(self) -> Status:
        """The gRPC status the caller gets, decided by the category (:data:`STATUSES`)."""
        return status_of(self)

    def fields(self) -> dict[str, str]:
        """What a log line about the refusal carries as structured fields (its ``extra``)."""
        return {"reason": self.label, "status": self.status.name}


class BadRequest(Refused):
    """What the request says is wrong whatever the node's state: INVALID_ARGUMENT.

    Bytes no kubelet sends, device IDs that are malformed, repeated or not
    offered here, more vNPUs than a container holds: the same request is
    refused again, however long the caller waits.
    """


class CannotServe(Refused):
    """The request is well-formed, but the node cannot serve it as things stand: FAILED_PRECONDITION.

    A device that is unhealthy, a scheduler's choice that names no chip of
    this node or no pod waiting for it, a claim not allocated yet or allocated
    elsewhere, a file the answer needs that cannot be written: the caller may
    succeed once the node, the cluster or the operator changed that state.
    """


class Unavailable(Refused):
    """Something the answer needs did not answer now (the API server): UNAVAILABLE; the caller retries."""


class PeerNotAdmitted(Refused):
    """The peer on the socket is not one it serves (by the uid the kernel gives): PERMISSION_DENIED."""


class TooLarge(Refused):
    """A message larger than any a kubelet sends: RESOURCE_EXHAUSTED."""


# The gRPC status of each category: the one place a refusal's status is decided.
STATUSES: Final[Mapping[type[Refused], Status]] = MappingProxyType(
    {
        BadRequest: Status.INVALID_ARGUMENT,
        CannotServe: Status.FAILED_PRECONDITION,
        Unavailable: Status.UNAVAILABLE,
        PeerNotAdmitted: Status.PERMISSION_DENIED,
        TooLarge: Status.RESOURCE_EXHAUSTED,
    }
)


def status_of(refused: Refused) -> Status:
    """The status of the refusal's category: the nearest class of its ancestry in :data:`STATUSES`."""
    for kind in type(refused).__mro__:
        status = STATUSES.get(kind)
        if status is not None:
            return status
    raise TypeError(
        f"{type(refused).__name__} derives from no category of STATUSES "
        f"({', '.join(kind.__name__ for kind in STATUSES)}): raise one of those, or add its row"
    )


def grpc_error(refused: Refused) -> GRPCError:
    """The error that answers the call: the category's status, the reason cut to fit 4 KiB."""
    return GRPCError(refused.status, capped(refused.reason))
