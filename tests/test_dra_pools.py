"""The allocator's view of a pool (tests/dra_pools.py), which the DRA tests check the plugin's pools with."""

from __future__ import annotations

from typing import Any

from dra_pools import pool_problems

COUNTERS = [
    {"name": "npu-0-counters", "counters": {"aicore": {"value": "8"}, "memory": {"value": "24576Mi"}}}
]
CONSUMER = {
    "name": "npu-0",
    "consumesCounters": [{"counterSet": "npu-0-counters", "counters": {"aicore": {"value": "8"}}}],
}


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
