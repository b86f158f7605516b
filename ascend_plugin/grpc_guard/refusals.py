"""Refused: every request the plugin does not serve, and the one place its gRPC status is decided.

A refusal is raised as the category that says what the caller can do (fix the request, wait, retry), and
the category alone decides the status (:data:`STATUSES`). ``label`` is a fixed word for the cause (the
metrics' and the log's ``reason``), ``reason`` the operator's sentence (the status message, cut to 4 KiB).
See ARCHITECTURE.md, "Errors".
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

    Not here: the plugin's own failures (a ``ChipError``, a ``KubeError``), which the part that asked turns
    into a refusal where the caller must hear of them. Raise a category below: it decides the status.
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
    """What the request says is wrong whatever the node's state (refused again however long the caller
    waits): INVALID_ARGUMENT."""


class CannotServe(Refused):
    """Well-formed, but the node cannot serve it as things stand (a device unhealthy, a claim allocated
    elsewhere): FAILED_PRECONDITION."""


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
