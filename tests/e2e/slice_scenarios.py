"""ResourceSlice publication scenarios, and what the real API server of each release answers to them.

A scenario writes slices to a target (slice_targets.py) and returns its outcome as plain JSON: for
a write, the spec as stored (``stored``; a taint's ``timeAdded`` that the server stamped shows as
TIME) or the refusal (``refused``: the status, and the fields the server's causes name).
``expected(release)`` is the real server's answer; test_slice_admission.py asserts it against the
real server, and holds the stand-in to the same answers where ``stand_in`` says it plays them.
"""

from __future__ import annotations

import copy
import datetime
import re
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from api import ApiError, Obj
from slice_targets import SLICES, Gates, Release, Target, refusal

Json = Any
DRIVER = "npu.huawei.com"
NODE = "node-1"
TIME = "TIME"  # a timeAdded the server stamped
GENERATED = "GENERATED"  # a name the server made from generateName
STAMPED_WITHIN = 3600.0  # seconds from now in which a timeAdded counts as the server's stamp
_SUFFIX = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")  # what the server appends to a generateName
SPLIT_LAYOUT: Release = (1, 35)  # counter sets and devices in slices of their own, new limits


@dataclass(frozen=True)
class Scenario:
    """One publication scenario; ``stand_in``: the loopback stand-in plays it too (the parity test)."""

    name: str
    run: Callable[[Target], Json]
    expected: Callable[[Release], Json]
    stand_in: bool = True


# -- writing --------------------------------------------------------------------------------------------


def slice_(
    devices: Sequence[Obj] | None = None,
    *,
    counters: Sequence[Obj] | None = None,
    node: str = NODE,
    driver: str = DRIVER,
    count: int = 1,
    generation: int = 1,
    **spec: Any,
) -> Obj:
    """A ResourceSlice of ``node``'s pool, named by the server."""
    body: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": f"{DRIVER}-{node}-"},
        "spec": {
            "driver": driver,
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


def create(target: Target, body: Obj, gates: Gates = Gates.DEFAULT, *, dry_run: bool = False) -> Json:
    """Create ``body``; its outcome."""
    return outcome(lambda: _create(target, body, gates, dry_run))


def _create(target: Target, body: Obj, gates: Gates, dry_run: bool) -> Obj:
    stored: Obj = target.api(gates).request(
        "POST", SLICES, body, query={"dryRun": "All"} if dry_run else None
    )
    return stored


def created(target: Target, body: Obj, gates: Gates = Gates.DEFAULT) -> Obj:
    """Create ``body``, which must be stored; the stored object."""
    return _create(target, body, gates, False)


def update(target: Target, stored: Obj, gates: Gates = Gates.DEFAULT) -> Json:
    return outcome(lambda: updated(target, stored, gates))


def updated(target: Target, stored: Obj, gates: Gates = Gates.DEFAULT) -> Obj:
    answer: Obj = target.api(gates).request("PUT", f"{SLICES}/{stored['metadata']['name']}", stored)
    return answer


def outcome(write: Callable[[], Obj]) -> Json:
    try:
        return {"stored": shown(write()["spec"])}
    except ApiError as error:
        return refusal(error)


# -- expecting ------------------------------------------------------------------------------------------


def refused(*fields: str, status: int = 422) -> Json:
    return {"refused": status, "fields": sorted(set(fields))}


def kept(body: Obj) -> Json:
    """Stored as sent (taints stamped with the time)."""
    spec = copy.deepcopy(body["spec"])
    for device in spec.get("devices") or []:
        for taint in device.get("taints") or []:
            taint.setdefault("timeAdded", TIME)
    return {"stored": spec}


PARTITIONS, SHARES, TAINTS = "partitions", "shares", "taints"
FEATURES = (PARTITIONS, SHARES, TAINTS)


def without(body: Obj, *features: str) -> Json:
    """Stored without the fields of ``features`` (their gates off), the rest as sent."""
    stored = kept(body)
    spec = stored["stored"]
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
    return stored


def as_gates_keep(body: Obj, gates: Gates, release: Release) -> Json:
    """As sent where the gates are on, without the three features' fields where they are off."""
    return kept(body) if gates.on(release) else without(body, *FEATURES)


def split(release: Release) -> bool:
    return release >= SPLIT_LAYOUT


# -- the content the scenarios publish ------------------------------------------------------------------

TAINT = {"key": "npu.huawei.com/unhealthy", "value": "SeparateNPU", "effect": "NoSchedule"}
TAINTED = {"name": "npu-0", "taints": [TAINT]}
COUNTER_SET = {
    "name": "npu-0-counters",
    "counters": {"aicore": {"value": "8"}, "memory": {"value": "24Gi"}},
}
CONSUMER = {
    "name": "npu-0",
    "consumesCounters": [{"counterSet": "npu-0-counters", "counters": {"aicore": {"value": "8"}}}],
}
SHARED = {
    "name": "npu-1",
    "allowMultipleAllocations": True,
    "capacity": {
        "shares": {
            "value": "4",
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}},
        }
    },
}


def one(
    name: str,
    body: Obj,
    expected: Callable[[Release], Json],
    gates: Gates = Gates.DEFAULT,
    *,
    stand_in: bool = True,
) -> Scenario:
    """A scenario of one create."""
    return Scenario(name, lambda target: create(target, body, gates), expected, stand_in)


def devices(count: int, **extra: Any) -> list[Obj]:
    return [{"name": f"npu-{n}", **copy.deepcopy(extra)} for n in range(count)]


def the_feature_gates() -> list[Scenario]:
    """What each gate keeps and drops: at the release's defaults, all on, all off."""
    counters = slice_(counters=[COUNTER_SET], count=2)
    consumers = slice_([CONSUMER], count=2)
    mixed = slice_([CONSUMER], counters=[COUNTER_SET])
    shared = slice_([SHARED])
    tainted = slice_([TAINTED])
    scenarios = []
    for gates in Gates:
        scenarios += [
            one(
                f"taints, gates {gates.value}",
                tainted,
                lambda r, g=gates: as_gates_keep(tainted, g, r),
                gates,
            ),
            one(
                f"shared device, gates {gates.value}",
                shared,
                lambda r, g=gates: as_gates_keep(shared, g, r),
                gates,
            ),
            one(
                f"counter sets alone, gates {gates.value}",
                counters,
                lambda r, g=gates: as_gates_keep(counters, g, r),
                gates,
            ),
            one(
                f"devices consuming another slice's counters, gates {gates.value}",
                consumers,
                lambda r, g=gates: (
                    refused("spec.devices[0].consumesCounters[0].counterSet")
                    if g.on(r) and not split(r)
                    else as_gates_keep(consumers, g, r)
                ),
                gates,
            ),
            one(
                f"counter sets beside their devices, gates {gates.value}",
                mixed,
                lambda r, g=gates: refused("spec") if g.on(r) and split(r) else as_gates_keep(mixed, g, r),
                gates,
                stand_in=True,
            ),
        ]
    return scenarios


def ratcheting() -> list[Scenario]:
    """A gate that is off drops nothing the stored object already uses (a downgraded cluster keeps it)."""

    def taints(target: Target) -> Json:
        stored = created(target, slice_([TAINTED]), Gates.ON)
        stored["spec"]["devices"].append({"name": "npu-1", "taints": [{"key": "k", "effect": "NoExecute"}]})
        again = updated(target, stored, Gates.OFF)
        return {"update": {"stored": shown(again["spec"])}, "generation": again["metadata"]["generation"]}

    def taints_expected(release: Release) -> Json:
        body = slice_([TAINTED, {"name": "npu-1", "taints": [{"key": "k", "effect": "NoExecute"}]}])
        return {"update": kept(body), "generation": 2}

    def partitions(target: Target) -> Json:
        body = slice_([CONSUMER], counters=None if split(target.release) else [COUNTER_SET])
        stored = created(target, body, Gates.ON)
        stored["spec"]["pool"]["generation"] = 2
        return {
            "update": update(target, stored, Gates.OFF),
            "new object": create(target, body, Gates.OFF),
        }

    def partitions_expected(release: Release) -> Json:
        body = slice_([CONSUMER], counters=None if split(release) else [COUNTER_SET], generation=2)
        fresh = slice_([CONSUMER], counters=None if split(release) else [COUNTER_SET])
        return {"update": kept(body), "new object": without(fresh, PARTITIONS)}

    def shares(target: Target) -> Json:
        stored = created(target, slice_([SHARED]), Gates.ON)
        stored["spec"]["devices"].append({**copy.deepcopy(SHARED), "name": "npu-2"})
        return {"update": update(target, stored, Gates.OFF)}

    def shares_expected(release: Release) -> Json:
        return {"update": kept(slice_([SHARED, {**SHARED, "name": "npu-2"}]))}

    return [
        Scenario("taints in use survive an update with the gate off", taints, taints_expected),
        Scenario("counters in use survive an update with the gate off", partitions, partitions_expected),
        Scenario("shared devices in use survive an update with the gate off", shares, shares_expected),
    ]


def defaults_and_forms() -> list[Scenario]:
    """What the server writes into a slice itself: taint times, quantities in their canonical form."""
    stamped = slice_([TAINTED])
    quantities = {
        "memory": "65536Mi",  # binary, whole: the largest suffix
        "halfGi": "1.5Gi",
        "thousand": "2000",  # decimal: the largest suffix of 1000
        "milli": "1000m",
        "half": "0.5",
        "exponent": "1e3",  # exponent form stays
    }
    canonical = {"memory": "64Gi", "halfGi": "1536Mi", "thousand": "2k", "milli": "1", "half": "500m"}
    canonical["exponent"] = "1e3"
    sent = slice_([{"name": "npu-0", "capacity": {k: {"value": v} for k, v in quantities.items()}}])
    stored = slice_([{"name": "npu-0", "capacity": {k: {"value": v} for k, v in canonical.items()}}])
    # How the plugin spells memory (faces/dra/quantities.py): already canonical, stored as sent.
    plugin_forms = ("64Gi", "32Gi", "24Gi", "1536Mi", "1Mi", "3Ti", "0", "20", "4", "1")
    ours = slice_(
        [{"name": "npu-0", "capacity": {f"q{n}": {"value": v} for n, v in enumerate(plugin_forms)}}]
    )
    given = {**TAINT, "timeAdded": "2025-01-02T03:04:05Z"}
    dated = slice_([{"name": "npu-0", "taints": [given]}])
    return [
        one("a taint without timeAdded gets the time", stamped, lambda r: kept(stamped), Gates.ON),
        one("a taint's own timeAdded is kept", dated, lambda r: {"stored": dated["spec"]}, Gates.ON),
        one("quantities are stored in their canonical form", sent, lambda r: {"stored": stored["spec"]}),
        one("the plugin's quantities are stored as sent", ours, lambda r: kept(ours)),
        one(
            "counters are stored in their canonical form",
            slice_(counters=[{"name": "s", "counters": {"memory": {"value": "24576Mi"}}}]),
            lambda r: kept(slice_(counters=[{"name": "s", "counters": {"memory": {"value": "24Gi"}}}])),
            Gates.ON,
        ),
    ]


def invalid_content() -> list[Scenario]:
    """Names, attributes and node selection the server refuses, whatever the release."""
    attributes33 = {f"a{n}": {"int": n} for n in range(33)}
    return [
        one("129 devices", slice_(devices(129)), lambda r: refused("spec.devices"), stand_in=False),
        one("128 devices", slice_(devices(128)), lambda r: kept(slice_(devices(128)))),
        one(
            "33 attributes and capacities",
            slice_([{"name": "npu-0", "attributes": attributes33}]),
            lambda r: refused("spec.devices[0]"),
            stand_in=False,
        ),
        one(
            "an attribute name that is no C identifier",
            slice_([{"name": "npu-0", "attributes": {"ai-cores": {"int": 1}}}]),
            lambda r: refused("spec.devices[0].attributes"),
            stand_in=False,
        ),
        one(
            "a string attribute of 65 bytes",
            slice_([{"name": "npu-0", "attributes": {"x": {"string": "s" * 65}}}]),
            lambda r: refused("spec.devices[0].attributes[x].string"),
            stand_in=False,
        ),
        one(
            "an attribute with two values",
            slice_([{"name": "npu-0", "attributes": {"x": {"int": 1, "string": "1"}}}]),
            lambda r: refused("spec.devices[0].attributes[x]"),
            stand_in=False,
        ),
        one(
            "a device name that is no DNS label",
            slice_([{"name": "NPU_0"}]),
            lambda r: refused("spec.devices[0].name"),
            stand_in=False,
        ),
        one(
            "two devices of one name",
            slice_([{"name": "npu-0"}, {"name": "npu-0"}]),
            lambda r: refused("spec.devices[1]"),
            stand_in=False,
        ),
        one(
            "two node selections",
            slice_([{"name": "npu-0"}], allNodes=True),
            lambda r: refused("spec"),
            stand_in=False,
        ),
        one(
            "a driver name in capitals",
            slice_([{"name": "npu-0"}], driver="NPU"),
            lambda r: kept(slice_([{"name": "npu-0"}], driver="NPU")),
        ),
        one(
            "a driver name that is no DNS subdomain",
            slice_([{"name": "npu-0"}], driver="npu_huawei"),
            lambda r: refused("spec.driver"),
            stand_in=False,
        ),
    ]


def taint_rules() -> list[Scenario]:
    """Taint effects and counts by release (the gate on)."""
    effect = slice_([{"name": "npu-0", "taints": [{"key": "k", "effect": "NoScale"}]}])
    informational = slice_([{"name": "npu-0", "taints": [{"key": "k", "effect": "None"}]}])

    def taints(count: int) -> Obj:
        return slice_(
            [{"name": "npu-0", "taints": [{"key": f"k{n}", "effect": "NoSchedule"} for n in range(count)]}]
        )

    return [
        one(
            "a taint effect no release knows",
            effect,
            lambda r: refused("spec.devices[0].taints[0].effect"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "the taint effect None",
            informational,
            lambda r: kept(informational) if split(r) else refused("spec.devices[0].taints[0].effect"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "5 taints on a device",
            taints(5),
            lambda r: kept(taints(5)) if split(r) else refused("spec.devices[0].taints"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "16 taints on a device",
            taints(16),
            lambda r: kept(taints(16)) if split(r) else refused("spec.devices[0].taints"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "17 taints on a device",
            taints(17),
            lambda r: refused("spec.devices[0].taints"),
            Gates.ON,
            stand_in=False,
        ),
    ]


def limits() -> list[Scenario]:
    """Devices per slice once some carry taints or consume counters; counter sets and consumptions."""

    def tainted(count: int) -> Obj:
        return slice_([{**d, "taints": [TAINT]} if d["name"] == "npu-3" else d for d in devices(count)])

    def consuming(count: int) -> Obj:
        return slice_(devices(count, consumesCounters=CONSUMER["consumesCounters"]))

    def unmatched(count: int) -> list[str]:
        return [f"spec.devices[{n}].consumesCounters[0].counterSet" for n in range(count)]

    def consumptions(count: int) -> Obj:
        entries = [{"counterSet": f"s{n}", "counters": {"aicore": {"value": "1"}}} for n in range(count)]
        return slice_([{"name": "npu-0", "consumesCounters": entries}])

    sets9 = slice_(counters=[{"name": f"s{n}", "counters": {"c": {"value": "1"}}} for n in range(9)])
    sets8 = slice_(counters=[{"name": f"s{n}", "counters": {"c": {"value": "1"}}} for n in range(8)])
    counters36 = slice_(
        counters=[
            {"name": f"s{n}", "counters": {f"c{i}": {"value": "1"} for i in range(9)}} for n in range(4)
        ]
    )
    counters33 = slice_(counters=[{"name": "s", "counters": {f"c{i}": {"value": "1"} for i in range(33)}}])
    twice = slice_([{"name": "npu-0", "consumesCounters": [CONSUMER["consumesCounters"][0]] * 2}])
    many_tainted = slice_(devices(100, taints=[TAINT]))
    return [
        one(
            "65 devices, one tainted",
            tainted(65),
            lambda r: refused("spec.devices") if split(r) else kept(tainted(65)),
            Gates.ON,
            stand_in=False,
        ),
        one("64 devices, one tainted", tainted(64), lambda r: kept(tainted(64)), Gates.ON),
        one(
            "100 tainted devices",
            many_tainted,
            lambda r: refused("spec.devices") if split(r) else kept(many_tainted),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "65 devices consuming counters",
            consuming(65),
            lambda r: refused("spec.devices") if split(r) else refused(*unmatched(65)),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "64 devices consuming counters",
            consuming(64),
            lambda r: kept(consuming(64)) if split(r) else refused(*unmatched(64)),
            Gates.ON,
        ),
        one(
            "9 counter sets",
            sets9,
            lambda r: refused("spec.sharedCounters") if split(r) else kept(sets9),
            Gates.ON,
            stand_in=False,
        ),
        one("8 counter sets", sets8, lambda r: kept(sets8), Gates.ON),
        one(
            "36 counters in 4 sets",
            counters36,
            lambda r: kept(counters36) if split(r) else refused("spec.sharedCounters"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "33 counters in one set",
            counters33,
            lambda r: (
                refused("spec.sharedCounters[0].counters") if split(r) else refused("spec.sharedCounters")
            ),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "3 consumption entries on a device",
            consumptions(3),
            lambda r: (
                refused("spec.devices[0].consumesCounters")
                if split(r)
                else refused(*(f"spec.devices[0].consumesCounters[{n}].counterSet" for n in range(3)))
            ),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "2 consumption entries on a device",
            consumptions(2),
            lambda r: (
                kept(consumptions(2))
                if split(r)
                else refused(*(f"spec.devices[0].consumesCounters[{n}].counterSet" for n in range(2)))
            ),
            Gates.ON,
        ),
        one(
            "one counter set consumed twice by a device",
            twice,
            lambda r: (
                refused("spec.devices[0].consumesCounters[1]")
                if split(r)
                else refused("spec.devices[0].consumesCounters[1]")
            ),
            Gates.ON,
            stand_in=False,
        ),
    ]


def request_policies() -> list[Scenario]:
    """Consumable capacity's request policies (the gate on)."""

    def shared(policy: Obj, multiple: bool = True) -> Obj:
        return slice_(
            [
                {
                    "name": "npu-0",
                    "allowMultipleAllocations": multiple,
                    "capacity": {"shares": {"value": "4", "requestPolicy": policy}},
                }
            ]
        )

    at = "spec.devices[0].capacity[shares].requestPolicy"
    cases = [
        ("a range without a default", {"validRange": {"min": "1"}}, f"{at}.default"),
        ("valid values out of order", {"default": "1", "validValues": ["2", "1"]}, f"{at}.validValues[1]"),
        (
            "a default not among the valid values",
            {"default": "3", "validValues": ["1", "2"]},
            f"{at}.validValues",
        ),
        ("valid values and a range", {"default": "1", "validValues": ["1"], "validRange": {"min": "1"}}, at),
        (
            "a default below the range",
            {"default": "0", "validRange": {"min": "1"}},
            f"{at}.validRange.default",
        ),
        (
            "a range above the capacity",
            {"default": "1", "validRange": {"min": "1", "max": "5"}},
            f"{at}.validRange.max",
        ),
        (
            "a default off the step",
            {"default": "2", "validRange": {"min": "1", "step": "2"}},
            f"{at}.validRange.step",
        ),
        (
            "a step beyond the capacity",
            {"default": "1", "validRange": {"min": "1", "step": "4"}},
            f"{at}.validRange.step",
        ),
    ]
    scenarios = [
        one(
            f"request policy: {name}", shared(policy), lambda r, f=field: refused(f), Gates.ON, stand_in=False
        )
        for name, policy, field in cases
    ]
    good = shared({"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}})
    above = shared({"default": "5"})  # a claim asking for the default would never fit: not refused
    scenarios += [
        one(
            "a request policy without multiple allocations",
            shared({"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}}, multiple=False),
            lambda r: refused(at),
            Gates.ON,
            stand_in=False,
        ),
        one("a request policy as the plugin publishes it", good, lambda r: kept(good), Gates.ON),
        one("request policy: a default above the capacity", above, lambda r: kept(above), Gates.ON),
    ]
    return scenarios


def fresh(base: str) -> str:
    """A node name no other run used: scenarios that list a node's slices run twice on one server."""
    return f"{base}-{secrets.token_hex(3)}"


def dry_runs() -> list[Scenario]:
    """A dry run answers what would be stored (as a real create would drop and default), stores nothing."""

    def run(target: Target) -> Json:
        node = fresh("dry-run")
        body = slice_([TAINTED], node=node)
        api = target.api()
        selector = f"spec.nodeName={node}"
        version = api.get(SLICES, fieldSelector=selector)["metadata"]["resourceVersion"]
        answer = api.request("POST", SLICES, body, query={"dryRun": "All"})
        return {
            "answer": {
                "stored": shown(
                    {**answer["spec"], "nodeName": NODE, "pool": body["spec"]["pool"] | {"name": NODE}}
                )
            },
            "name": _generated(answer["metadata"]["name"], body),
            "stored after": len(api.get(SLICES, fieldSelector=selector)["items"]),
            "events": api.watch(SLICES, 1, fieldSelector=selector, resourceVersion=version),
        }

    def expected(release: Release) -> Json:
        answer = as_gates_keep(slice_([TAINTED]), Gates.DEFAULT, release)
        return {"answer": answer, "name": GENERATED, "stored after": 0, "events": []}

    invalid = slice_([{"name": "NPU"}])
    return [
        Scenario("a dry run stores nothing", run, expected),
        Scenario(
            "a dry run of an invalid slice is refused",
            lambda target: create(target, invalid, dry_run=True),
            lambda r: refused("spec.devices[0].name"),
            stand_in=False,
        ),
    ]


def _generated(name: str, body: Obj) -> str:
    """GENERATED for a name the server made from the body's generateName; else the name."""
    prefix: str = body["metadata"]["generateName"]
    return GENERATED if name.startswith(prefix) and _SUFFIX.fullmatch(name[len(prefix) :]) else name


def the_api() -> list[Scenario]:
    """What the plugin's ResourceSlice controller relies on besides admission."""

    def generated(target: Target) -> Json:
        body = slice_([{"name": "npu-0"}])
        stored = created(target, body)
        metadata = stored["metadata"]
        return {
            "name": _generated(metadata["name"], body),
            "generation": metadata["generation"],
            "uid": str(uuid.UUID(metadata["uid"])) == metadata["uid"],
            "kind": [stored["apiVersion"], stored["kind"]],
        }

    def generations(target: Target) -> Json:
        stored = created(target, slice_([{"name": "npu-0"}]))
        same = updated(target, stored)
        same["spec"]["devices"].append({"name": "npu-1"})
        changed = updated(target, same)
        return [
            stored["metadata"]["generation"],
            same["metadata"]["generation"],
            changed["metadata"]["generation"],
        ]

    def immutable(target: Target) -> Json:
        stored = created(target, slice_([{"name": "npu-0"}]))
        answers = {}
        for field, change in (
            ("driver", lambda s: s["spec"].update(driver="gpu.example.com")),
            ("nodeName", lambda s: s["spec"].update(nodeName="node-2")),
            ("pool name", lambda s: s["spec"]["pool"].update(name="node-2")),
        ):
            changed = copy.deepcopy(stored)
            change(changed)
            answers[field] = update(target, changed)
        return answers

    def selectors(target: Target) -> Json:
        node, other = fresh("selector-1"), fresh("selector-2")
        labels = {
            (DRIVER, node): "ours on 1",
            ("gpu.example.com", node): "theirs on 1",
            (DRIVER, other): "ours on 2",
        }
        for driver, on in labels:
            created(target, slice_([{"name": "npu-0"}], driver=driver, node=on))
        api = target.api()
        answers: dict[str, Json] = {}
        for label, selector in (
            ("driver and node", f"spec.driver={DRIVER},spec.nodeName={node}"),
            ("another driver", f"spec.driver!={DRIVER},spec.nodeName={node}"),
            ("pool", f"spec.pool.name={other}"),
            ("a field without a selector", "spec.devices=npu-0"),
        ):
            try:
                items = api.get(SLICES, fieldSelector=selector)["items"]
                answers[label] = sorted(labels[s["spec"]["driver"], s["spec"]["nodeName"]] for s in items)
            except ApiError as error:
                answers[label] = refusal(error)
        return answers

    def wiped(target: Target) -> Json:
        """The kubelet deletes a node's slices in one call; a watch sees each go."""
        node, other = fresh("wiped"), fresh("kept")
        names = [
            created(target, slice_([{"name": f"npu-{n}"}], node=node))["metadata"]["name"] for n in range(2)
        ]
        created(target, slice_([{"name": "npu-0"}], node=other))
        api = target.api()
        selector = f"spec.nodeName={node}"
        version = api.get(SLICES, fieldSelector=selector)["metadata"]["resourceVersion"]
        api.request("DELETE", SLICES, query={"fieldSelector": selector})
        events = api.watch(SLICES, 2, fieldSelector=selector, resourceVersion=version)
        return {
            "events": sorted([e["type"], names.index(e["object"]["metadata"]["name"])] for e in events),
            "left": len(api.get(SLICES, fieldSelector=f"spec.nodeName={other}")["items"]),
        }

    def preconditions(target: Target) -> Json:
        """A delete with the UID and resourceVersion seen: refused once the slice changed."""
        node = fresh("preconditions")
        stored = created(target, slice_([{"name": "npu-0"}], node=node))
        stored["spec"]["devices"].append({"name": "npu-1"})
        changed = updated(target, copy.deepcopy(stored))
        metadata = stored["metadata"]
        api, path = target.api(), f"{SLICES}/{metadata['name']}"
        words = {metadata["name"]: "NAME", metadata["resourceVersion"]: "SEEN"}
        words[changed["metadata"]["resourceVersion"]] = "STORED"
        answers: dict[str, Json] = {}
        for seen, label in ((stored, "stale"), (changed, "current")):
            options = {"preconditions": {k: seen["metadata"][k] for k in ("uid", "resourceVersion")}}
            try:
                api.request("DELETE", path, options)
                answers[label] = "deleted"
            except ApiError as error:
                answers[label] = {**refusal(error), "message": _replaced(error.message, words)}
        answers["left"] = len(api.get(SLICES, fieldSelector=f"spec.nodeName={node}")["items"])
        return answers

    def forbidden(target: Target) -> Json:
        with target.without_permission() as api:
            try:
                api.request("POST", SLICES, slice_([{"name": "npu-0"}]))
            except ApiError as error:
                return {**refusal(error), "message": re.sub(r'User "[^"]*"', 'User "USER"', error.message)}
        return "created"

    group = "resource.k8s.io"
    return [
        Scenario(
            "created with generateName",
            generated,
            lambda r: {
                "name": GENERATED,
                "generation": 1,
                "uid": True,
                "kind": [f"{group}/v1", "ResourceSlice"],
            },
        ),
        Scenario("the generation counts changes of the spec", generations, lambda r: [1, 1, 2]),
        Scenario(
            "driver, node and pool name are immutable",
            immutable,
            lambda r: {
                "driver": refused("spec.driver"),
                "nodeName": refused("spec.nodeName"),
                "pool name": refused("spec.pool.name"),
            },
        ),
        Scenario(
            "field selectors",
            selectors,
            lambda r: {
                "driver and node": ["ours on 1"],
                "another driver": ["theirs on 1"],
                "pool": ["ours on 2"],
                "a field without a selector": {"refused": 400, "reason": "BadRequest"},
            },
        ),
        Scenario(
            "a node's slices deleted at once",
            wiped,
            lambda r: {"events": [["DELETED", 0], ["DELETED", 1]], "left": 1},
        ),
        Scenario(
            "delete preconditions",
            preconditions,
            lambda r: {
                "stale": {
                    "refused": 409,
                    "reason": "Conflict",
                    "message": f'Operation cannot be fulfilled on ResourceSlice.{group} "NAME": the ResourceVersion in the '
                    "precondition (SEEN) does not match the ResourceVersion in record (STORED). The object might have "
                    "been modified",
                },
                "current": "deleted",
                "left": 0,
            },
        ),
        Scenario(
            "a user without the permission",
            forbidden,
            lambda r: {
                "refused": 403,
                "reason": "Forbidden",
                "message": f'resourceslices.{group} is forbidden: User "USER" cannot create resource "resourceslices" '
                f'in API group "{group}" at the cluster scope',
            },
        ),
    ]


def _replaced(text: str, words: dict[str, str]) -> str:
    for word, replacement in words.items():
        text = text.replace(word, replacement)
    return text


SCENARIOS: list[Scenario] = [
    *the_feature_gates(),
    *ratcheting(),
    *defaults_and_forms(),
    *invalid_content(),
    *taint_rules(),
    *limits(),
    *request_policies(),
    *dry_runs(),
    *the_api(),
]


def the_plugin_s(name: str, probes: Sequence[Obj], slices: Sequence[Obj], node: str) -> Scenario:
    """The plugin's own publication: its probes as dry runs, then its pool's slices created."""

    def run(target: Target) -> Json:
        owner = [target.node_owner(node)]
        return {
            "probes": [create(target, probe, dry_run=True) for probe in probes],
            "slices": [
                create(target, {**s, "metadata": {**s["metadata"], "ownerReferences": owner}}) for s in slices
            ],
        }

    def expected(release: Release) -> Json:
        return {
            "probes": [as_gates_keep(probe, Gates.DEFAULT, release) for probe in probes],
            "slices": [kept(slice_) for slice_ in slices],
        }

    return Scenario(f"the plugin's slices: {name}", run, expected)
