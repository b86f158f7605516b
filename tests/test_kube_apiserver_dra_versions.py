"""The loopback API server plays 1.34, 1.35, 1.36 and 1.37 for partitions, consumable capacity and taints.

Held to the facts of the reference (k8s.io/api resource/v1 types per tag, the
ResourceSlice strategy and validation): a gate that is off drops its fields
silently unless the stored object already uses them; 1.35 moved counter sets
into slices of their own with new limits; request policies need
``allowMultipleAllocations``; a dry run stores nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from ascend_plugin.kubeapi.client import RESOURCE_SLICES, Kube
from ascend_plugin.kubeapi.errors import ApiError
from ascend_plugin.testing.kube_apiserver import FakeApiServer
from ascend_plugin.testing.resource_api import (
    CONSUMABLE_CAPACITY,
    DEVICE_TAINTS,
    PARTITIONS,
    ServerVersion,
    pool_problems,
)

pytestmark = pytest.mark.anyio

COUNTERS = [
    {"name": "npu-0-counters", "counters": {"aicore": {"value": "8"}, "memory": {"value": "24576Mi"}}}
]
CONSUMER = {
    "name": "npu-0",
    "consumesCounters": [{"counterSet": "npu-0-counters", "counters": {"aicore": {"value": "8"}}}],
}
SHARED = {
    "name": "npu-0",
    "allowMultipleAllocations": True,
    "capacity": {
        "shares": {
            "value": "4",
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}},
        }
    },
}
TAINTED = {"name": "npu-0", "taints": [{"key": "npu.huawei.com/unhealthy", "effect": "NoSchedule"}]}


def body(count: int = 1, generation: int = 1, **content: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": "npu.huawei.com-node-1-"},
        "spec": {
            "driver": "npu.huawei.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": generation, "resourceSliceCount": count},
            **content,
        },
    }


async def refused(kube: Kube, slice_: dict[str, Any], problem: str) -> None:
    with pytest.raises(ApiError) as raised:
        await kube.create(RESOURCE_SLICES, "", slice_)
    assert raised.value.status == 422
    assert problem in raised.value.message


@pytest.mark.parametrize(
    ("version", "kept"), [("1.34", False), ("1.35", False), ("1.36", True), ("1.37", True)]
)
def test_the_gates_are_on_by_default_from_1_36(version: str, kept: bool) -> None:
    server = ServerVersion.of(version)
    assert [server.gate(g) for g in (PARTITIONS, CONSUMABLE_CAPACITY, DEVICE_TAINTS)] == [kept] * 3


@pytest.mark.parametrize("version", ["1.34", "1.35"])
async def test_a_gate_that_is_off_drops_its_fields_silently(
    kube: Kube, apiserver: FakeApiServer, version: str
) -> None:
    apiserver.kube_version = version
    counters = await kube.create(RESOURCE_SLICES, "", body(2, sharedCounters=COUNTERS))
    assert "sharedCounters" not in counters["spec"], "a counters-only slice becomes an empty one"
    devices = await kube.create(RESOURCE_SLICES, "", body(2, devices=[CONSUMER, {**SHARED, "name": "npu-1"}]))
    consumer, shared = devices["spec"]["devices"]
    assert "consumesCounters" not in consumer
    assert "allowMultipleAllocations" not in shared
    assert shared["capacity"] == {"shares": {"value": "4"}}
    tainted = await kube.create(RESOURCE_SLICES, "", body(devices=[TAINTED]))
    assert "taints" not in tainted["spec"]["devices"][0]


@pytest.mark.parametrize("version", ["1.36", "1.37"])
async def test_from_1_36_they_are_kept(kube: Kube, apiserver: FakeApiServer, version: str) -> None:
    apiserver.kube_version = version
    counters = await kube.create(RESOURCE_SLICES, "", body(3, sharedCounters=COUNTERS))
    assert counters["spec"]["sharedCounters"][0]["counters"]["memory"] == {"value": "24Gi"}, "canonical"
    devices = await kube.create(RESOURCE_SLICES, "", body(3, devices=[CONSUMER, {**SHARED, "name": "npu-1"}]))
    consumer, shared = devices["spec"]["devices"]
    assert consumer["consumesCounters"] == CONSUMER["consumesCounters"]
    assert shared["allowMultipleAllocations"] is True
    assert shared["capacity"]["shares"]["requestPolicy"]["validRange"] == {
        "min": "1",
        "max": "4",
        "step": "1",
    }
    tainted = await kube.create(RESOURCE_SLICES, "", body(3, devices=[{**TAINTED, "name": "npu-2"}]))
    assert tainted["spec"]["devices"][0]["taints"][0]["timeAdded"]


async def test_fields_in_use_survive_an_update_after_the_gate_went_off(
    kube: Kube, apiserver: FakeApiServer
) -> None:
    apiserver.kube_version = "1.36"
    stored = await kube.create(RESOURCE_SLICES, "", body(devices=[CONSUMER]))
    apiserver.gates[PARTITIONS] = False
    stored["spec"]["pool"]["generation"] = 2
    updated = await kube.replace(RESOURCE_SLICES, stored["metadata"]["name"], "", stored)
    assert updated["spec"]["devices"][0]["consumesCounters"], "ratcheting: the old object used them"
    created = await kube.create(RESOURCE_SLICES, "", body(devices=[CONSUMER]))
    assert "consumesCounters" not in created["spec"]["devices"][0], "a new object does not"


async def test_a_gate_can_be_turned_on_before_1_36(kube: Kube, apiserver: FakeApiServer) -> None:
    apiserver.kube_version = "1.35"
    apiserver.gates[PARTITIONS] = True
    stored = await kube.create(RESOURCE_SLICES, "", body(2, sharedCounters=COUNTERS))
    assert stored["spec"]["sharedCounters"]


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
async def test_from_1_35_counter_sets_and_devices_live_in_slices_of_their_own(
    kube: Kube, apiserver: FakeApiServer, version: str
) -> None:
    apiserver.kube_version = version
    apiserver.gates[PARTITIONS] = True
    await refused(
        kube,
        body(sharedCounters=COUNTERS, devices=[CONSUMER]),
        "only one of `sharedCounters` or `devices` is allowed",
    )
    nine = [{"name": f"npu-{n}-counters", "counters": {"aicore": {"value": "8"}}} for n in range(9)]
    await refused(kube, body(sharedCounters=nine), "spec.sharedCounters: Too many: 9: must have at most 8")
    three = [{"counterSet": f"s{n}", "counters": {"aicore": {"value": "1"}}} for n in range(3)]
    await refused(
        kube, body(devices=[{"name": "npu-0", "consumesCounters": three}]), "Too many: 3: must have at most 2"
    )
    twice = [{"counterSet": "s", "counters": {"aicore": {"value": "1"}}}] * 2
    await refused(kube, body(devices=[{"name": "npu-0", "consumesCounters": twice}]), "Duplicate value: 's'")
    many = [{**CONSUMER, "name": f"npu-{n}"} for n in range(65)]
    await refused(kube, body(devices=many), "spec.devices: Too many: 65: must have at most 64")
    stored = await kube.create(RESOURCE_SLICES, "", body(devices=many[:64]))
    assert len(stored["spec"]["devices"]) == 64


async def test_1_34_with_the_gate_on_wants_counter_sets_beside_their_devices(
    kube: Kube, apiserver: FakeApiServer
) -> None:
    apiserver.gates[PARTITIONS] = True  # kube_version 1.34
    mixed = await kube.create(RESOURCE_SLICES, "", body(sharedCounters=COUNTERS, devices=[CONSUMER]))
    assert mixed["spec"]["sharedCounters"]
    assert mixed["spec"]["devices"][0]["consumesCounters"]
    await refused(kube, body(devices=[CONSUMER]), "must reference a counter set of this slice")
    sets = [{"name": f"s{n}", "counters": {f"c{i}": {"value": "1"} for i in range(9)}} for n in range(4)]
    await refused(kube, body(sharedCounters=sets), "Too many: 36: must have at most 32 counters in all sets")
    many = [{"name": f"npu-{n}", "taints": TAINTED["taints"]} for n in range(100)]
    apiserver.gates[DEVICE_TAINTS] = True
    stored = await kube.create(RESOURCE_SLICES, "", body(devices=many))
    assert len(stored["spec"]["devices"]) == 100, "1.34 allows 128 whatever the devices carry"


@pytest.mark.parametrize(
    ("capacity", "problem"),
    [
        ({"value": "4", "requestPolicy": {"validRange": {"min": "1"}}}, "default: Required value"),
        ({"value": "4", "requestPolicy": {"default": "5"}}, "must not exceed the capacity value"),
        ({"value": "4", "requestPolicy": {"default": "1", "validValues": ["2", "1"]}}, "sorted ascending"),
        (
            {"value": "4", "requestPolicy": {"default": "3", "validValues": ["1", "2"]}},
            "must be one of validValues",
        ),
        (
            {
                "value": "4",
                "requestPolicy": {"default": "1", "validValues": ["1"], "validRange": {"min": "1"}},
            },
            "only one of validValues or validRange",
        ),
        (
            {"value": "4", "requestPolicy": {"default": "0", "validRange": {"min": "1"}}},
            "less than validRange.min",
        ),
        (
            {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "5"}}},
            "validRange.max",
        ),
        (
            {"value": "4", "requestPolicy": {"default": "2", "validRange": {"min": "1", "step": "2"}}},
            "must be multiples",
        ),
        (
            {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1", "step": "4"}}},
            "min+step",
        ),
    ],
)
async def test_request_policies_follow_the_consumable_capacity_rules(
    kube: Kube, apiserver: FakeApiServer, capacity: dict[str, Any], problem: str
) -> None:
    apiserver.kube_version = "1.36"
    device = {"name": "npu-0", "allowMultipleAllocations": True, "capacity": {"shares": capacity}}
    await refused(kube, body(devices=[device]), problem)


async def test_a_request_policy_needs_multiple_allocations(kube: Kube, apiserver: FakeApiServer) -> None:
    apiserver.kube_version = "1.36"
    device = {**SHARED, "allowMultipleAllocations": False}
    await refused(kube, body(devices=[device]), "allowMultipleAllocations must be true")


async def test_taint_effects_and_counts_by_release(kube: Kube, apiserver: FakeApiServer) -> None:
    apiserver.gates[DEVICE_TAINTS] = True
    informational = {"name": "npu-0", "taints": [{"key": "k", "effect": "None"}]}
    await refused(kube, body(devices=[informational]), 'supported values: "NoExecute", "NoSchedule"')
    five = {"name": "npu-0", "taints": [{"key": f"k{n}", "effect": "NoSchedule"} for n in range(5)]}
    await refused(kube, body(devices=[five]), "Too many: 5: must have at most 4")
    apiserver.kube_version = "1.35"
    await kube.create(RESOURCE_SLICES, "", body(devices=[informational]))
    await kube.create(RESOURCE_SLICES, "", body(devices=[{**five, "name": "npu-1"}]))


async def test_a_dry_run_answers_what_would_be_stored_and_stores_nothing(
    kube: Kube, apiserver: FakeApiServer
) -> None:
    version = apiserver.version
    answer = await kube.create(RESOURCE_SLICES, "", body(devices=[TAINTED]), dry_run=True)
    assert "taints" not in answer["spec"]["devices"][0], "dropped as a real create would"
    assert answer["metadata"]["name"].startswith("npu.huawei.com-node-1-")
    assert apiserver.slices() == [], "nothing stored"
    assert apiserver.version == version, "no watch event"
    assert len(apiserver.requests_of("create", "resourceslices", dry_run=True)) == 1
    assert apiserver.requests_of("create", "resourceslices") == []
    await refused(kube, body(devices=[{"name": "NPU"}]), "Invalid value")


def test_the_allocator_s_view_of_a_pool() -> None:
    counters = body(2, sharedCounters=COUNTERS)
    devices = body(2, devices=[CONSUMER])
    assert pool_problems([counters, devices]) == []
    assert pool_problems([devices])[0] == (
        "pool npu.huawei.com/node-1 generation 1: 1 slice(s), resourceSliceCount says [2]"
    ), "incomplete"
    assert "consumes missing set" in pool_problems([body(1, devices=[CONSUMER])])[0]
    wrong = body(
        2,
        devices=[
            {
                **CONSUMER,
                "consumesCounters": [{"counterSet": "npu-0-counters", "counters": {"x": {"value": "1"}}}],
            }
        ],
    )
    assert "consumes missing counter x" in pool_problems([counters, wrong])[0]
    assert "defined twice" in pool_problems([counters, body(2, sharedCounters=COUNTERS)])[0]
    older = body(2, 0, sharedCounters=[{"name": "other", "counters": {"a": {"value": "1"}}}])
    assert pool_problems([older, counters, devices]) == [], "only the newest generation counts"
