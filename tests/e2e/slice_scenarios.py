"""What the real API server does to the ResourceSlices sent to it: kept, dropped, defaulted or refused.

The feature gates (what each keeps or drops, at the release's defaults, all on, all off), ratcheting,
the fields the server writes itself, the content it refuses whatever the release, the taint rules,
the limits of the 1.34 and the 1.35+ layouts, consumable capacity's request policies, and the
plugin's own publication. Each expectation is the real server's answer for the release
(slice_writes.py says how outcomes read); slice_api_scenarios.py adds dry runs and the API's other
behaviours the plugin relies on.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from api import Obj
from slice_api_scenarios import API_SCENARIOS
from slice_targets import Gates, Release, Target
from slice_writes import (
    NEWER,
    PARTITIONS,
    Json,
    Scenario,
    as_gates_keep,
    create,
    created,
    kept,
    refused,
    shown,
    slice_,
    split,
    update,
    updated,
    without,
)

TAINT = {"key": "npu.huawei.com/unhealthy", "value": "SeparateNPU", "effect": "NoSchedule"}
TAINTED = {"name": "npu-0", "taints": [TAINT]}
COUNTER_SET = {"name": "npu-0-counters", "counters": {"aicore": {"value": "8"}, "memory": {"value": "24Gi"}}}
CONSUMES = [{"counterSet": "npu-0-counters", "counters": {"aicore": {"value": "8"}}}]
CONSUMER = {"name": "npu-0", "consumesCounters": CONSUMES}
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

Body = Obj | Callable[[Release], Obj]  # a slice, or the slice a driver would send to a release


def one(
    name: str,
    body: Body,
    expected: Callable[[Release], Json],
    gates: Gates = Gates.DEFAULT,
    *,
    stand_in: bool = True,
) -> Scenario:
    """A scenario of one create."""

    def run(target: Target) -> Json:
        return create(target, body(target.release) if callable(body) else body, gates)

    return Scenario(name, run, expected, stand_in)


def devices(count: int, **extra: Any) -> list[Obj]:
    return [{"name": f"npu-{n}", **copy.deepcopy(extra)} for n in range(count)]


def consuming(devices: Sequence[Obj], sets: Sequence[Obj] = (COUNTER_SET,)) -> Callable[[Release], Obj]:
    """Devices that consume counters, as a driver publishes them: from 1.35 the sets live in a slice
    of their own; in 1.34 they are beside the devices."""
    return lambda release: slice_(devices, counters=None if split(release) else sets)


def the_feature_gates() -> list[Scenario]:
    """What each gate keeps and drops: at the release's defaults, all on, all off."""
    return [scenario for gates in Gates for scenario in _gated(gates)]


def _gated(g: Gates) -> list[Scenario]:
    """The scenarios of the_feature_gates() with the gates ``g``."""
    counters = slice_(counters=[COUNTER_SET], count=2)
    consumers = slice_([CONSUMER], count=2)
    mixed = slice_([CONSUMER], counters=[COUNTER_SET])
    empty = slice_([{"name": "npu-0"}], counters=[])
    shared = slice_([SHARED])
    tainted = slice_([TAINTED])

    def consumers_expected(r: Release) -> Json:
        if g.on(r) and not split(r):
            return refused("spec.devices[0].consumesCounters[0].counterSet")
        return as_gates_keep(consumers, g, r)

    def layout(otherwise: Callable[[Release], Json]) -> Callable[[Release], Json]:
        """Refused where the gates are on and the release wants counter sets and devices apart."""
        return lambda r: refused("spec") if g.on(r) and split(r) else otherwise(r)

    return [
        one(f"taints, gates {g.value}", tainted, lambda r: as_gates_keep(tainted, g, r), g),
        one(f"shared device, gates {g.value}", shared, lambda r: as_gates_keep(shared, g, r), g),
        one(f"counter sets alone, gates {g.value}", counters, lambda r: as_gates_keep(counters, g, r), g),
        one(f"devices consuming another slice's counters, gates {g.value}", consumers, consumers_expected, g),
        one(
            f"counter sets beside their devices, gates {g.value}",
            mixed,
            layout(lambda r: as_gates_keep(mixed, g, r)),
            g,
        ),
        one(
            f"an empty list of counter sets beside devices, gates {g.value}",
            empty,
            layout(lambda r: kept(empty, r)),
            g,
        ),
    ]


def ratcheting() -> list[Scenario]:
    """A gate that is off drops nothing the stored object already uses (a downgraded cluster keeps it)."""
    second = {"name": "npu-1", "taints": [{"key": "k", "effect": "NoExecute"}]}

    def taints(target: Target) -> Json:
        stored = created(target, slice_([TAINTED]), Gates.ON)
        stored["spec"]["devices"].append(second)
        again = updated(target, stored, Gates.OFF)
        return {"update": {"stored": shown(again["spec"])}, "generation": again["metadata"]["generation"]}

    def partitions(target: Target) -> Json:
        body = consuming([CONSUMER])(target.release)
        stored = created(target, body, Gates.ON)
        stored["spec"]["pool"]["generation"] = 2
        return {"update": update(target, stored, Gates.OFF), "new object": create(target, body, Gates.OFF)}

    def partitions_expected(release: Release) -> Json:
        body = consuming([CONSUMER])(release)
        later = copy.deepcopy(body)
        later["spec"]["pool"]["generation"] = 2
        return {"update": kept(later, release), "new object": without(body, release, PARTITIONS)}

    def shares(target: Target) -> Json:
        stored = created(target, slice_([SHARED]), Gates.ON)
        stored["spec"]["devices"].append({**copy.deepcopy(SHARED), "name": "npu-2"})
        return {"update": update(target, stored, Gates.OFF)}

    return [
        Scenario(
            "taints in use survive an update with the gate off",
            taints,
            lambda r: {"update": kept(slice_([TAINTED, second]), r), "generation": 2},
        ),
        Scenario("counters in use survive an update with the gate off", partitions, partitions_expected),
        Scenario(
            "shared devices in use survive an update with the gate off",
            shares,
            lambda r: {"update": kept(slice_([SHARED, {**SHARED, "name": "npu-2"}]), r)},
        ),
    ]


def written_by_the_server() -> list[Scenario]:
    """What the server writes into a slice itself: taint times, quantities in canonical form, empty fields."""
    sent = {"memory": "65536Mi", "half": "1.5Gi", "thousand": "2000", "milli": "1000m", "small": "0.5"}
    sent["exponent"] = "1e3"
    canonical = {"memory": "64Gi", "half": "1536Mi", "thousand": "2k", "milli": "1", "small": "500m"}
    canonical["exponent"] = "1e3"
    quantities = slice_([{"name": "npu-0", "capacity": {k: {"value": v} for k, v in sent.items()}}])
    as_stored = slice_([{"name": "npu-0", "capacity": {k: {"value": v} for k, v in canonical.items()}}])
    # How the plugin spells quantities (faces/dra/devices.py): canonical already, stored as sent.
    spellings = ("64Gi", "32Gi", "24Gi", "1536Mi", "1Mi", "3Ti", "0", "20", "4", "1")
    ours = slice_([{"name": "npu-0", "capacity": {f"q{n}": {"value": v} for n, v in enumerate(spellings)}}])
    stamped = slice_([TAINTED])
    dated = slice_([{"name": "npu-0", "taints": [{**TAINT, "timeAdded": "2025-01-02T03:04:05Z"}]}])
    counters = slice_(counters=[{"name": "s", "counters": {"memory": {"value": "24576Mi"}}}])
    counters_stored = slice_(counters=[{"name": "s", "counters": {"memory": {"value": "24Gi"}}}])
    empty = slice_([])
    blank = slice_(
        [{"name": "npu-0", "attributes": {}, "capacity": {}, "taints": [], "consumesCounters": []}]
    )
    return [
        one("a taint without timeAdded gets the time", stamped, lambda r: kept(stamped, r), Gates.ON),
        one("a taint's own timeAdded is kept", dated, lambda r: kept(dated, r), Gates.ON),
        one(
            "quantities are stored in their canonical form",
            quantities,
            lambda r: kept(as_stored, r),
            stand_in=False,
        ),
        one("the plugin's quantities are stored as sent", ours, lambda r: kept(ours, r)),
        one(
            "counters are stored in their canonical form",
            counters,
            lambda r: kept(counters_stored, r),
            Gates.ON,
            stand_in=False,
        ),
        one("a slice without devices (an empty pool)", empty, lambda r: kept(empty, r)),
        one("a device's empty fields are left out", blank, lambda r: kept(blank, r), Gates.ON),
    ]


def invalid_content() -> list[Scenario]:
    """Names, attributes and node selection the server refuses, whatever the release."""

    def attributes(values: dict[str, Obj]) -> Obj:
        return slice_([{"name": "npu-0", "attributes": values}])

    capitals = slice_([{"name": "npu-0"}], driver="NPU")
    return [
        one("129 devices", slice_(devices(129)), lambda r: refused("spec.devices")),
        one("128 devices", slice_(devices(128)), lambda r: kept(slice_(devices(128)), r)),
        one(
            "33 attributes and capacities",
            attributes({f"a{n}": {"int": n} for n in range(33)}),
            lambda r: refused("spec.devices[0]"),
            stand_in=False,
        ),
        one(
            "an attribute name that is no C identifier",
            attributes({"ai-cores": {"int": 1}}),
            lambda r: refused(
                "spec.devices[0].attributes" if r >= NEWER else "spec.devices[0].attributes[ai-cores]"
            ),
            stand_in=False,
        ),
        one(
            "a string attribute of 65 bytes",
            attributes({"x": {"string": "s" * 65}}),
            lambda r: refused("spec.devices[0].attributes[x].string"),
            stand_in=False,
        ),
        one(
            "an attribute with two values",
            attributes({"x": {"int": 1, "string": "1"}}),
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
            lambda r: refused("spec.devices[1]" if r >= NEWER else "spec.devices[1].name"),
            stand_in=False,
        ),
        one(
            "two node selections",
            slice_([{"name": "npu-0"}], allNodes=True),
            lambda r: refused("spec"),
            stand_in=False,
        ),
        one("a driver name in capitals (a warning only)", capitals, lambda r: kept(capitals, r)),
        one(
            "a driver name that is no DNS subdomain",
            slice_([{"name": "npu-0"}], driver="npu_huawei"),
            lambda r: refused("spec.driver"),
            stand_in=False,
        ),
    ]


def taint_rules() -> list[Scenario]:
    """Taint effects and counts by release (the gate on)."""

    def taints(count: int, effect: str = "NoSchedule") -> Obj:
        return slice_(
            [{"name": "npu-0", "taints": [{"key": f"k{n}", "effect": effect} for n in range(count)]}]
        )

    def from_1_35(body: Obj, *fields: str) -> Callable[[Release], Json]:
        return lambda r: kept(body, r) if split(r) else refused(*fields)

    effect = "spec.devices[0].taints[0].effect"
    count = "spec.devices[0].taints"
    return [
        one(
            "a taint effect no release knows",
            taints(1, "NoScale"),
            lambda r: refused(effect),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "the taint effect None",
            taints(1, "None"),
            from_1_35(taints(1, "None"), effect),
            Gates.ON,
            stand_in=False,
        ),
        one("5 taints on a device", taints(5), from_1_35(taints(5), count), Gates.ON, stand_in=False),
        one("16 taints on a device", taints(16), from_1_35(taints(16), count), Gates.ON, stand_in=False),
        one("17 taints on a device", taints(17), lambda r: refused(count), Gates.ON, stand_in=False),
    ]


def limits() -> list[Scenario]:
    """Devices a slice holds once some carry taints or consume counters; counter sets; consumptions."""

    def tainted(count: int) -> Obj:
        return slice_([{**d, "taints": [TAINT]} if d["name"] == "npu-3" else d for d in devices(count)])

    def sets(count: int, counters: int = 1) -> Obj:
        counter = {f"c{i}": {"value": "1"} for i in range(counters)}
        return slice_(counters=[{"name": f"s{n}", "counters": counter} for n in range(count)])

    def consumptions(count: int) -> Callable[[Release], Obj]:
        names = [f"s{n}" for n in range(count)]
        entries = [{"counterSet": name, "counters": {"c": {"value": "1"}}} for name in names]
        counter_sets = [{"name": name, "counters": {"c": {"value": "1"}}} for name in names]
        return consuming([{"name": "npu-0", "consumesCounters": entries}], counter_sets)

    def on_split(refusal: Json, body: Body) -> Callable[[Release], Json]:
        """Refused from 1.35, stored by 1.34."""
        return lambda r: refusal if split(r) else kept(body(r) if callable(body) else body, r)

    twice = consuming([{"name": "npu-0", "consumesCounters": CONSUMES * 2}])
    unknown = consuming(
        [
            {
                "name": "npu-0",
                "consumesCounters": [{"counterSet": "npu-0-counters", "counters": {"x": {"value": "1"}}}],
            }
        ]
    )
    too_many = refused("spec.devices")
    return [
        one("65 devices, one tainted", tainted(65), on_split(too_many, tainted(65)), Gates.ON),
        one("64 devices, one tainted", tainted(64), lambda r: kept(tainted(64), r), Gates.ON),
        one(
            "100 devices, all tainted",
            slice_(devices(100, taints=[TAINT])),
            on_split(too_many, slice_(devices(100, taints=[TAINT]))),
            Gates.ON,
        ),
        one(
            "65 devices consuming counters",
            consuming(devices(65, consumesCounters=CONSUMES)),
            on_split(too_many, consuming(devices(65, consumesCounters=CONSUMES))),
            Gates.ON,
        ),
        one(
            "64 devices consuming counters",
            consuming(devices(64, consumesCounters=CONSUMES)),
            lambda r: kept(consuming(devices(64, consumesCounters=CONSUMES))(r), r),
            Gates.ON,
        ),
        one("9 counter sets", sets(9), on_split(refused("spec.sharedCounters"), sets(9)), Gates.ON),
        one("8 counter sets", sets(8), lambda r: kept(sets(8), r), Gates.ON),
        one(
            "36 counters in 4 sets",
            sets(4, 9),
            lambda r: kept(sets(4, 9), r) if split(r) else refused("spec.sharedCounters"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "33 counters in one set",
            sets(1, 33),
            lambda r: refused("spec.sharedCounters[0].counters" if split(r) else "spec.sharedCounters"),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "3 consumption entries on a device",
            consumptions(3),
            on_split(refused("spec.devices[0].consumesCounters"), consumptions(3)),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "2 consumption entries on a device",
            consumptions(2),
            lambda r: kept(consumptions(2)(r), r),
            Gates.ON,
        ),
        one(
            "one counter set consumed twice by a device",
            twice,
            lambda r: refused(
                "spec.devices[0].consumesCounters[1]"
                if split(r)
                else "spec.devices[0].consumesCounters[1].counterSet"
            ),
            Gates.ON,
            stand_in=False,
        ),
        one(
            "a counter its set does not have",
            unknown,
            lambda r: (
                kept(unknown(r), r) if split(r) else refused("spec.devices[0].consumesCounters[0].counters")
            ),
            Gates.ON,
            stand_in=False,
        ),
    ]


def request_policies() -> list[Scenario]:
    """Consumable capacity's request policies (the gate on)."""

    def shared(policy: Obj, multiple: bool = True) -> Obj:
        capacity = {"shares": {"value": "4", "requestPolicy": policy}}
        return slice_([{"name": "npu-0", "allowMultipleAllocations": multiple, "capacity": capacity}])

    at = "spec.devices[0].capacity[shares].requestPolicy"
    published = {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}}
    cases: list[tuple[str, Obj, Callable[[Release], str]]] = [
        ("a range without a default", {"validRange": {"min": "1"}}, lambda r: f"{at}.default"),
        (
            "valid values out of order",
            {"default": "1", "validValues": ["2", "1"]},
            lambda r: f"{at}.validValues[1]",
        ),
        (
            "a default not among the valid values",
            {"default": "3", "validValues": ["1", "2"]},
            lambda r: f"{at}.validValues",
        ),
        (
            "valid values and a range",
            {"default": "1", "validValues": ["1"], "validRange": {"min": "1"}},
            lambda r: at,
        ),
        (
            "a default below the range",
            {"default": "0", "validRange": {"min": "1"}},
            lambda r: f"{at}.validRange.default" if r >= NEWER else f"{at}.validRange.min",
        ),
        (
            "a range above the capacity",
            {"default": "1", "validRange": {"min": "1", "max": "5"}},
            lambda r: f"{at}.validRange.max",
        ),
        (
            "a default off the step",
            {"default": "2", "validRange": {"min": "1", "step": "2"}},
            lambda r: f"{at}.validRange.step",
        ),
        (
            "a step beyond the capacity",
            {"default": "1", "validRange": {"min": "1", "step": "4"}},
            lambda r: f"{at}.validRange.step",
        ),
    ]
    scenarios = [
        one(
            f"request policy: {name}",
            shared(policy),
            _refused_at(field),
            Gates.ON,
            stand_in=False,
        )
        for name, policy, field in cases
    ]
    above = shared({"default": "5"})  # a claim taking the default would never fit: not refused
    scenarios += [
        one(
            "request policy without multiple allocations",
            shared(published, multiple=False),
            lambda r: refused(at),
            Gates.ON,
            stand_in=False,
        ),
        one("request policy: a default above the capacity", above, lambda r: kept(above, r), Gates.ON),
        one(
            "request policy as the plugin publishes it",
            shared(published),
            lambda r: kept(shared(published), r),
            Gates.ON,
        ),
    ]
    return scenarios


def _refused_at(field: Callable[[Release], str]) -> Callable[[Release], Json]:
    return lambda r: refused(field(r))


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
            "slices": [kept(slice_, release) for slice_ in slices],
        }

    return Scenario(f"the plugin's slices: {name}", run, expected)


SCENARIOS: list[Scenario] = [
    *the_feature_gates(),
    *ratcheting(),
    *written_by_the_server(),
    *invalid_content(),
    *taint_rules(),
    *limits(),
    *request_policies(),
    *API_SCENARIOS,
]
assert len({scenario.name for scenario in SCENARIOS}) == len(SCENARIOS), "scenario names are unique"
