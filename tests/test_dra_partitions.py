"""Chips split on demand as DRA partitionable devices: counter sets, the whole chip, partitions, the layout.

Each chip's counter set holds what its vNPUs can take; the whole chip
consumes all of it and each partition what one vNPU of its template takes.
The layout keeps the API's 1.35+ limits (counter sets in slices of their own,
8 a slice, 64 devices a slice with counters or taints, 2 consumption entries a
device, a chip's devices together), and every slice passes the 1.36 and 1.37
schemas and validation rules, the pool the allocator's checks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dra_harness import DRIVER, EVERY_PLACE_310P3, as_slices, cel_selects, split_inventory, validated
from kube_harness import set_faults

from ascend_plugin.faces.dra.devices import DeviceCatalog, Publishing, slice_contents
from ascend_plugin.faces.dra.names import MAX_COUNTER_SETS_PER_SLICE, chip_of
from ascend_plugin.fault_policy.faults import FaultLevel

PARTITIONS = Publishing(partitions=True)
MAX_CONSUMPTIONS = 2  # entries a device may have from 1.35 (the real server checks: tests/e2e)

NODES = {
    "910B3 x8": ("910", "910B3", 20.0, 65536, 8),
    "910B4 x8": ("910", "910B4", 20.0, 32768, 8),
    "910A x8": ("910", "910A", 32.0, 32768, 8),
    "910B2 x16": ("910", "910B2", 24.0, 65536, 16),
    "310P3 x8": ("310P", "310P3", 8.0, 24576, 8),
}


def catalog(short_tmp: Path, node: str) -> DeviceCatalog:
    inventory, splits = split_inventory(short_tmp, *NODES[node])
    return DeviceCatalog(inventory, DRIVER, splits=splits)


@pytest.mark.parametrize("node", list(NODES))
def test_every_slice_is_valid_for_1_36_and_1_37_and_the_pool_usable(short_tmp: Path, node: str) -> None:
    contents = slice_contents(catalog(short_tmp, node).pool(PARTITIONS))
    validated(as_slices(contents))
    counters = [c for c in contents if "sharedCounters" in c]
    devices = [c for c in contents if "devices" in c]
    assert contents == [*counters, *devices], "counter sets first"
    assert all(len(c["sharedCounters"]) <= MAX_COUNTER_SETS_PER_SLICE for c in counters)  # type: ignore[arg-type]
    for content in devices:
        chips = Counter(chip_of(d["name"]) for d in content["devices"])  # type: ignore[union-attr]
        assert len(content["devices"]) <= 64  # type: ignore[arg-type]
        for device in content["devices"]:  # type: ignore[union-attr]
            assert len(device["consumesCounters"]) <= MAX_CONSUMPTIONS
        for other in devices:
            if other is not content:
                assert not chips.keys() & {chip_of(d["name"]) for d in other["devices"]}, (  # type: ignore[union-attr]
                    "a chip's devices share one slice"
                )


def counters(**amounts: int | str) -> dict[str, dict[str, str]]:
    return {name: {"value": str(amount)} for name, amount in sorted(amounts.items())}


def test_a_310p_chip_the_whole_and_its_partitions(short_tmp: Path) -> None:
    pool = catalog(short_tmp, "310P3 x8").pool(PARTITIONS)
    assert pool.counter_sets[0] == {
        "name": "npu-0-counters",
        "counters": counters(aicore=8, aicpu=7, jpegd=16, jpege=8, memory="24Gi", vdec=12, venc=3, vpc=12),
    }
    whole, *partitions = pool.chips[0]
    assert whole["name"] == "npu-0"
    assert whole["consumesCounters"] == [
        {"counterSet": "npu-0-counters", "counters": pool.counter_sets[0]["counters"]}
    ], "the whole chip takes everything"
    assert Counter(p["attributes"]["vnpuTemplate"]["string"] for p in partitions) == EVERY_PLACE_310P3
    vir02_1c = next(p for p in partitions if p["name"] == "npu-0-vir02-1c-0")
    assert vir02_1c["attributes"]["aiCores"] == {"int": 2}
    assert vir02_1c["attributes"]["chipName"] == {"string": "310P3"}, "the chip's attributes"
    kept = {"family", "chipName", "topologyUnit", "numaNode", "resource.kubernetes.io/pcieRoot"}
    assert set(vir02_1c["attributes"]) == {"aiCores", "vnpuTemplate"} | (kept & set(whole["attributes"]))
    assert {"phyID", "cardID", "driverVersion"} <= set(whole["attributes"]), "identities: the chip's alone"
    assert vir02_1c["capacity"] == {"memory": {"value": "6Gi"}}
    assert vir02_1c["consumesCounters"] == [
        {
            "counterSet": "npu-0-counters",
            "counters": counters(aicore=2, aicpu=1, jpegd=4, jpege=2, memory="6Gi", vdec=3, vpc=3),
        }
    ], "venc 0: left out"


def test_partitions_are_selected_by_template_with_cel(short_tmp: Path) -> None:
    devices = catalog(short_tmp, "910B3 x8").pool(PARTITIONS).devices
    attributes = f'device.attributes["{DRIVER}"]'
    expression = f'"vnpuTemplate" in {attributes} && {attributes}.vnpuTemplate == "vir10_3c_32g"'
    chosen = [d["name"] for d in devices if cel_selects(expression, d, DRIVER)]
    assert chosen == [f"npu-{phy}-vir10-3c-32g-{n}" for phy in range(8) for n in range(2)]
    whole = f'!("vnpuTemplate" in {attributes})'
    assert [d["name"] for d in devices if cel_selects(whole, d, DRIVER)] == [f"npu-{phy}" for phy in range(8)]


def test_an_unhealthy_chip_keeps_its_partitions_beside_it_tainted_or_takes_them_along(
    short_tmp: Path,
) -> None:
    pick = catalog(short_tmp, "910B3 x8")
    set_faults(pick.inventory, "Ascend910-3", (0x80E01801, FaultLevel.SeparateNPU))
    tainted = pick.pool(Publishing(partitions=True, taints=True))
    chip = tainted.chips[3]
    assert {d["taints"][0]["effect"] for d in chip} == {"NoExecute"}
    assert len(chip) == 7, "the whole chip and its six partitions"
    assert "npu-3-counters" in [s["name"] for s in tainted.counter_sets]
    validated(as_slices(slice_contents(tainted)))
    gone = pick.pool(PARTITIONS)
    assert [d for chip in gone.chips for d in chip if chip_of(d["name"]) == 3] == []
    assert "npu-3-counters" not in [s["name"] for s in gone.counter_sets]


def test_no_eviction_when_the_setting_says_so(short_tmp: Path) -> None:
    inventory, splits = split_inventory(short_tmp, *NODES["910B3 x8"])
    pick = DeviceCatalog(inventory, DRIVER, splits=splits, evict=False)
    set_faults(inventory, "Ascend910-3", (0x80E01801, FaultLevel.SeparateNPU))
    chip = pick.pool(Publishing(partitions=True, taints=True)).chips[3]
    assert {d["taints"][0]["effect"] for d in chip} == {"NoSchedule"}


def test_without_counters_the_chips_are_whole_only(short_tmp: Path) -> None:
    pool = catalog(short_tmp, "910B3 x8").pool(Publishing())
    assert pool.counter_sets == []
    assert [d["name"] for d in pool.devices] == [f"npu-{phy}" for phy in range(8)]
    assert not any("consumesCounters" in d for d in pool.devices)


def test_shared_chips_are_one_device_of_n_shares(short_tmp: Path) -> None:
    inventory, _ = split_inventory(short_tmp, "310P", "310P3", 8.0, 24576, 2)
    shared = DeviceCatalog(inventory, DRIVER, share_count=4).pool(Publishing(shares=True)).devices
    device: dict[str, Any] = shared[0]
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"] == {
        "shares": {
            "value": "4",
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}},
        }
    }
    assert device["attributes"]["shareCount"] == {"int": 4}
    validated(
        as_slices(
            slice_contents(DeviceCatalog(inventory, DRIVER, share_count=4).pool(Publishing(shares=True)))
        )
    )
    plain = DeviceCatalog(inventory, DRIVER, share_count=4).pool().devices
    assert "allowMultipleAllocations" not in plain[0], "without consumable capacity, whole chips"
