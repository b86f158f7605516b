"""GetPreferredAllocation's answer."""

from __future__ import annotations

from collections.abc import Sequence


def preferred_devices(available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """A valid preference: every must-include ID, then available ones, ``size`` in all.

    Fewer than ``size`` IDs come back only when fewer are available; the kubelet
    tolerates a short answer. Order is kept stable (by the kubelet's order) so
    repeated calls agree.
    """
    chosen = list(dict.fromkeys(must_include))
    for device_id in available:
        if len(chosen) >= size:
            break
        if device_id not in chosen:
            chosen.append(device_id)
    return chosen[: max(size, len(dict.fromkeys(must_include)))]
