"""What the DRA driver asks of the API server, as RBAC names it: doctor asks about exactly these, and the
chart's test holds its rules to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class ApiGrant:
    """Verbs on a cluster-wide resource of an API group ("" is the core group)."""

    group: str
    resource: str
    verbs: tuple[str, ...]


DRA_GRANTS: Final[tuple[ApiGrant, ...]] = (
    # The node's pool: listed and watched (field selectors), created, updated, read again after a
    # conflict, strays and extras deleted.
    ApiGrant("resource.k8s.io", "resourceslices", ("get", "list", "watch", "create", "update", "delete")),
    # The claim the kubelet asks to prepare.
    ApiGrant("resource.k8s.io", "resourceclaims", ("get",)),
    # The Node, the slices' owner.
    ApiGrant("", "nodes", ("get",)),
)
