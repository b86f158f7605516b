"""KubeletCounters: what the face serving the kubelet has counted, as the metrics read it. It lives
beside the faces, in none of them, so that no face knows another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KubeletCounters:
    """What the kubelet-facing face has counted (the device plugin's, or the DRA driver's claims)."""

    allocations: int = 0
    allocation_errors: Mapping[str, int] = field(default_factory=dict)
    updates_sent: int = 0
    registrations: int = 0
    claims_prepared: int = 0
    claims_unprepared: int = 0
    prepare_errors: Mapping[str, int] = field(default_factory=dict)
