"""How the ResourceSlice scenarios write to a target, and how their outcomes and expectations are told.

An outcome is plain JSON, so the real server's and the stand-in's compare with ``==`` and their first
difference can be named: a write shows as ``{"stored": spec}`` (a taint's ``timeAdded`` the server
stamped just now as TIME) or ``{"refused": status, "fields": [...], "messages": [...]}`` (what the
server's causes say). Expectations are built from what was sent: ``kept`` (as sent, in the release's
stored form), ``without`` (a feature's fields dropped), ``refused`` (the fields; messages aside).
"""

from __future__ import annotations

import copy
import datetime
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from api import ApiError, Obj
from slice_targets import SLICES, Gates, Release, Target

Json = Any
DRIVER = "npu.huawei.com"
NODE = "node-1"
TIME = "TIME"  # a timeAdded the server stamped
MESSAGES = "messages"  # a refusal's cause messages
STAMPED_WITHIN = 3600.0  # seconds from now in which a timeAdded counts as the server's stamp
SPLIT_LAYOUT: Release = (1, 35)  # counter sets and devices in slices of their own, new limits
# Facts seen to change between the releases run here, 1.34.4 and 1.37.2 (1.35 and 1.36 not run):
# the newer answer is expected from 1.37.
NEWER: Release = (1, 37)


@dataclass(frozen=True)
class Scenario:
    """One scenario; ``stand_in``: the loopback stand-in plays it too (the parity test holds it to it)."""

    name: str
    run: Callable[[Target], Json]
    expected: Callable[[Release], Json]
    stand_in: bool = True


def split(release: Release) -> bool:
    return release >= SPLIT_LAYOUT


def fresh(base: str) -> str:
    """A node name no other run used (a scenario that lists a node's slices runs twice on one server)."""
    return f"{base}-{secrets.token_hex(3)}"


# -- writing --------------------------------------------------------------------------------------------


def slice_(
    devices: Sequence[Obj] | None = None,
    *,
    counters: Sequence[Obj] | None = None,
    node: str = NODE,
    count: int = 1,
    generation: int = 1,
    **spec: Any,
) -> Obj:
    """A ResourceSlice of ``node``'s pool (``spec`` overrides), named by the server."""
    body: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": f"{DRIVER}-{node}-"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
        },
    }
    if counters is not None:
        body["spec"]["sharedCounters"] = copy.deepcopy(list(counters))
    if devices is not None:
        body["spec"]["devices"] = copy.deepcopy(list(devices))
    body["spec"].update(spec)
    return body


def created(target: Target, body: Obj, gates: Gates = Gates.DEFAULT, *, dry_run: bool = False) -> Obj:
    """Create ``body``, which must be admitted; the server's answer."""
    query = {"dryRun": "All"} if dry_run else None
    answer: Obj = target.api(gates).request("POST", SLICES, body, query=query)
    return answer


def updated(target: Target, stored: Obj, gates: Gates = Gates.DEFAULT) -> Obj:
    """Replace the slice ``stored`` names with ``stored``, which must be admitted; the server's answer."""
    answer: Obj = target.api(gates).request("PUT", f"{SLICES}/{stored['metadata']['name']}", stored)
    return answer


def create(target: Target, body: Obj, gates: Gates = Gates.DEFAULT, *, dry_run: bool = False) -> Json:
    """Create ``body``; the outcome."""
    return outcome(lambda: created(target, body, gates, dry_run=dry_run))


def update(target: Target, stored: Obj, gates: Gates = Gates.DEFAULT) -> Json:
    return outcome(lambda: updated(target, stored, gates))


def outcome(write: Callable[[], Obj]) -> Json:
    try:
        return {"stored": shown(write()["spec"])}
    except ApiError as error:
        return refusal(error)


def refusal(error: ApiError) -> Json:
    """What a refusal says: its status and the fields its causes name, with their messages (or its
    reason, when no cause names a field)."""
    try:
        status = json.loads(error.body)
    except ValueError:
        status = {}
    causes = [c for c in (status.get("details") or {}).get("causes") or [] if c.get("field")]
    if not causes:
        return {"refused": error.status, "reason": error.reason}
    fields = sorted({cause["field"] for cause in causes})
    return {"refused": error.status, "fields": fields, MESSAGES: sorted(c.get("message", "") for c in causes)}


def facts(outcome: Json) -> Json:
    """``outcome`` without the refusals' messages: what the table asserts for every scenario (the parity
    test compares the messages too, where the stand-in plays the scenario)."""
    if isinstance(outcome, dict):
        return {key: facts(value) for key, value in outcome.items() if key != MESSAGES}
    if isinstance(outcome, list):
        return [facts(value) for value in outcome]
    return outcome


def shown(spec: Obj) -> Obj:
    """A stored spec with the taint times the server stamped (now, in its format) as TIME."""
    spec = copy.deepcopy(spec)
    for device in spec.get("devices") or []:
        for taint in device.get("taints") or []:
            if _stamped_now(str(taint.get("timeAdded", ""))):
                taint["timeAdded"] = TIME
    return spec


def _stamped_now(text: str) -> bool:
    try:
        stamp = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return False
    return abs(stamp.timestamp() - time.time()) < STAMPED_WITHIN


# -- expecting ------------------------------------------------------------------------------------------


def refused(*fields: str, status: int = 422) -> Json:
    return {"refused": status, "fields": sorted(set(fields))}


def stored_form(spec: Obj, release: Release) -> Obj:
    """``spec`` as the server writes it back: empty lists and maps left out, but for 1.34's
    ``devices``, which is never left out (null when empty)."""
    spec = {key: value for key, value in copy.deepcopy(spec).items() if value not in ([], {})}
    devices = [
        {k: v for k, v in device.items() if v not in ([], {})} for device in spec.pop("devices", None) or []
    ]
    if devices or not split(release):
        spec["devices"] = devices or None
    return spec


def kept(body: Obj, release: Release) -> Json:
    """Stored as sent (a taint without a time gets the time)."""
    spec = stored_form(body["spec"], release)
    for device in spec.get("devices") or []:
        for taint in device.get("taints") or []:
            taint.setdefault("timeAdded", TIME)
    return {"stored": spec}


PARTITIONS, SHARES, TAINTS = "partitions", "shares", "taints"
FEATURES = (PARTITIONS, SHARES, TAINTS)


def without(body: Obj, release: Release, *features: str) -> Json:
    """Stored without the fields of ``features`` (their gates off), the rest as sent."""
    body = copy.deepcopy(body)
    spec = body["spec"]
    if PARTITIONS in features:
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
    for device in spec.get("devices") or []:
        if PARTITIONS in features:
            for key in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                device.pop(key, None)
        if SHARES in features:
            device.pop("allowMultipleAllocations", None)
            for capacity in (device.get("capacity") or {}).values():
                capacity.pop("requestPolicy", None)
        if TAINTS in features:
            device.pop("taints", None)
    return kept(body, release)


def as_gates_keep(body: Obj, gates: Gates, release: Release) -> Json:
    """As sent where the gates are on, without the three features' fields where they are off."""
    return kept(body, release) if gates.on(release) else without(body, release, *FEATURES)
