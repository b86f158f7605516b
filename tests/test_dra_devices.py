"""ResourceSlice devices: names, values within the API's limits, quantities as the server writes them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kube_harness import make_inventory, set_faults
from log_records import fields, records

from ascend_plugin.faces.dra.devices import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_EFFECTS,
    DeviceCatalog,
    PoolDevices,
    Publishing,
    binary_quantity,
    slice_contents,
)
from ascend_plugin.faces.dra.names import (
    checked_attribute_name,
    device_name,
    phy_of,
    request_base,
)
from ascend_plugin.fault_policy.faults import FaultLevel


@pytest.mark.parametrize(
    ("mib", "quantity"),
    [
        (65536, "64Gi"),
        (32768, "32Gi"),
        (24576, "24Gi"),
        (1536, "1536Mi"),
        (1, "1Mi"),
        (3 * 1024 * 1024, "3Ti"),
        (0, "0"),
    ],
)
def test_memory_is_published_in_the_api_server_s_canonical_form(mib: int, quantity: str) -> None:
    assert binary_quantity(mib) == quantity


def test_device_names_are_dns_labels_of_the_physical_id() -> None:
    assert [device_name(phy) for phy in (0, 7, 15)] == ["npu-0", "npu-7", "npu-15"]
    assert [phy_of(name) for name in ("npu-0", "npu-15", "npu-01", "gpu-0", "npu-", "npu-1x")] == [
        0,
        15,
        None,
        None,
        None,
        None,
    ]


def test_a_subrequest_counts_as_its_request() -> None:
    assert [request_base(name) for name in ("npus", "npus/big", "a/b/c")] == ["npus", "npus", "a"]


@pytest.mark.parametrize("name", ["aiCores", "resource.kubernetes.io/pcieRoot", "_x", "a" * 32])
def test_attribute_names_the_api_allows(name: str) -> None:
    assert checked_attribute_name(name) == name


@pytest.mark.parametrize("name", ["ai-cores", "1st", "a" * 33, "npu.huawei.com/"])
def test_attribute_names_the_api_refuses(name: str) -> None:
    with pytest.raises(ValueError, match="C identifier of at most 32"):
        checked_attribute_name(name)


def sizes(devices: list[dict[str, object]]) -> list[int]:
    contents = slice_contents(PoolDevices([], [[device] for device in devices]))
    return [len(content["devices"]) for content in contents]  # type: ignore[arg-type]


def test_slices_hold_128_devices_or_64_once_any_is_tainted() -> None:
    plain: list[dict[str, object]] = [{"name": f"npu-{phy}"} for phy in range(300)]
    assert sizes(plain) == [128, 128, 44]
    tainted = [*plain[:99], {"name": "npu-99", "taints": [{"key": "k", "effect": NO_SCHEDULE}]}]
    assert sizes(tainted) == [64, 36]
    assert slice_contents(PoolDevices([], [])) == [{"devices": []}], "an empty pool is still one slice"


def test_every_device_stays_within_32_attributes_and_capacities(tmp_path: Path) -> None:
    inventory = make_inventory(tmp_path, family="910", chip_name="910B3", phy_ids=(0,))
    (device,) = DeviceCatalog(inventory, "npu.huawei.com").pool().devices
    assert len(device["attributes"]) + len(device.get("capacity", {})) <= 32


def test_a_chip_name_longer_than_the_api_allows_is_cut_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inventory = make_inventory(tmp_path, family="910", chip_name="910B3" + "x" * 80, phy_ids=(0,))
    (device,) = DeviceCatalog(inventory, "npu.huawei.com").pool().devices
    assert device["attributes"]["chipName"] == {"string": ("910B3" + "x" * 80)[:64]}
    (cut,) = records(caplog, "ascend_plugin.faces.dra.devices", level=logging.WARNING)
    assert fields(cut, "chip", "attribute") == {"chip": 0, "attribute": "chipName"}


def test_unhealthy_chips_leave_or_stay_tainted(tmp_path: Path) -> None:
    inventory = make_inventory(tmp_path, family="910", chip_name="910B3", phy_ids=(0, 1))
    set_faults(inventory, "Ascend910-1", (0x80E01801, FaultLevel.SeparateNPU))
    catalog = DeviceCatalog(inventory, "npu.huawei.com")
    assert [device["name"] for device in catalog.pool().devices] == ["npu-0"]
    tainted = catalog.pool(Publishing(taints=True)).devices
    assert [device["name"] for device in tainted] == ["npu-0", "npu-1"]
    assert tainted[1]["taints"] == [
        {"key": "npu.huawei.com/unhealthy", "value": "SeparateNPU", "effect": NO_EXECUTE}
    ]


def test_every_unhealthy_level_has_an_effect() -> None:
    assert set(TAINT_EFFECTS) == {level for level in FaultLevel if not level.healthy}
    assert {level for level, effect in TAINT_EFFECTS.items() if effect == NO_EXECUTE} == {
        FaultLevel.RestartNPU,
        FaultLevel.SeparateNPU,
        FaultLevel.ManuallySeparateNPU,
    }
