"""The DRA guide's claims for a vir04 and for a share are valid and ask for what the driver publishes.

Each claim's YAML is taken from docs/dra.md, validated against the 1.36 and
1.37 schemas, and evaluated as the scheduler would: the chart's DeviceClass
and the request's CEL selectors against the devices the driver publishes for a
310P node split on demand, or shared four ways; a capacity request against the
shared device's request policy.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from chart_harness import ChartRenderer
from dra_harness import DRIVER, cel_selects, split_inventory

from ascend_plugin.faces.dra.devices import DeviceCatalog, Publishing

ROOT = Path(__file__).resolve().parent.parent


def claims() -> dict[str, dict[str, Any]]:
    """The guide's ResourceClaimTemplates, by name."""
    text = (ROOT / "docs" / "dra.md").read_text(encoding="utf-8")
    blocks = [part.split("```", 1)[0] for part in text.split("```yaml\n")[1:]]
    documents = [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]
    return {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == "ResourceClaimTemplate"}


def request(name: str) -> dict[str, Any]:
    (wanted,) = claims()[name]["spec"]["spec"]["devices"]["requests"]
    exactly: dict[str, Any] = wanted["exactly"]
    return exactly


def chosen(rendering: Any, wanted: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    classes = {m["metadata"]["name"]: m for m in rendering.of_kind("DeviceClass")}
    selectors = [s["cel"]["expression"] for s in classes[wanted["deviceClassName"]]["spec"]["selectors"]]
    selectors += [s["cel"]["expression"] for s in wanted.get("selectors", [])]
    return [d for d in devices if all(cel_selects(expression, d, DRIVER) for expression in selectors)]


@pytest.mark.parametrize("kube_version", ["1.36", "1.37"])
@pytest.mark.parametrize("name", ["one-vir04", "half-a-310p"])
def test_the_claims_are_valid_for_kubernetes(name: str, kube_version: str) -> None:
    kubernetes_validate.validate(claims()[name], kube_version, strict=True)


def test_the_vir04_claim_gets_a_vir04_partition_of_a_310p(chart: ChartRenderer, short_tmp: Path) -> None:
    inventory, splits = split_inventory(short_tmp, "310P", "310P3", 8.0, 24576, 4)
    devices = DeviceCatalog(inventory, DRIVER, splits=splits).pool(Publishing(partitions=True)).devices
    picked = chosen(chart.render({"serve": "dra"}), request("one-vir04"), devices)
    assert [d["name"] for d in picked] == [f"npu-{phy}-vir04-0" for phy in range(4)]
    assert {d["attributes"]["vnpuTemplate"]["string"] for d in picked} == {"vir04"}


def test_the_share_claim_gets_two_of_a_310p_s_four_shares(chart: ChartRenderer, short_tmp: Path) -> None:
    inventory, _ = split_inventory(short_tmp, "310P", "310P3", 8.0, 24576, 2)
    devices = DeviceCatalog(inventory, DRIVER, share_count=4).pool(Publishing(shares=True)).devices
    wanted = request("half-a-310p")
    picked = chosen(chart.render({"serve": "dra"}), wanted, devices)
    assert [d["name"] for d in picked] == ["npu-0", "npu-1"]
    ((capacity_name, amount),) = wanted["capacity"]["requests"].items()
    domain, _, capacity = capacity_name.rpartition("/")
    assert domain == DRIVER
    for device in picked:
        published = device["capacity"][capacity]
        policy = published["requestPolicy"]["validRange"]
        asked, low, high, step = (Decimal(v) for v in (amount, policy["min"], policy["max"], policy["step"]))
        assert low <= asked <= high, "within the request policy"
        assert (asked - low) % step == Decimal(0), "no rounding up: exactly two shares"
        assert asked * 2 == Decimal(published["value"]), "half the chip"
