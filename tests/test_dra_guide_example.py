"""The DRA guide's ResourceClaimTemplate is valid and asks for what the driver publishes: a ring's 4 chips."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from chart_harness import ChartRenderer
from dra_harness import cel_selects, server_inventory

from ascend_plugin.faces.dra.devices import DeviceCatalog

ROOT = Path(__file__).resolve().parent.parent
DRIVER = "npu.huawei.com"


def example() -> list[dict[str, Any]]:
    section = (ROOT / "docs" / "dra.md").read_text(encoding="utf-8")
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    return [document for document in yaml.safe_load_all(block) if document]


def request() -> tuple[dict[str, Any], dict[str, Any]]:
    template = next(doc for doc in example() if doc["kind"] == "ResourceClaimTemplate")
    devices = template["spec"]["spec"]["devices"]
    return devices["requests"][0], devices["constraints"][0]


def published(short_tmp: Path, chip_name: str, cores: float) -> list[dict[str, Any]]:
    """Eight chips of a 910 server as the driver publishes them."""
    return DeviceCatalog(server_inventory(short_tmp, chip_name, cores), DRIVER).pool().devices


@pytest.mark.parametrize("kube_version", ["1.34", "1.35"])
def test_the_example_is_valid_for_kubernetes(kube_version: str) -> None:
    documents = example()
    assert [doc["kind"] for doc in documents] == ["ResourceClaimTemplate", "Pod"]
    for document in documents:
        kubernetes_validate.validate(document, kube_version, strict=True)


def test_it_names_a_device_class_the_chart_installs(chart: ChartRenderer) -> None:
    classes = {m["metadata"]["name"] for m in chart.render({"serve": "dra"}).of_kind("DeviceClass")}
    assert request()[0]["exactly"]["deviceClassName"] in classes


def test_a_first_generation_server_offers_four_chips_of_one_ring(short_tmp: Path) -> None:
    wanted, constraint = request()
    devices = published(short_tmp, "910A", 32.0)
    selected = [
        d
        for d in devices
        if all(cel_selects(s["cel"]["expression"], d, DRIVER) for s in wanted["exactly"]["selectors"])
    ]
    assert len(selected) == 8
    domain, _, name = constraint["matchAttribute"].rpartition("/")
    assert domain == DRIVER
    rings = collections.Counter(device["attributes"][name]["string"] for device in selected)
    assert rings == {"ring-0": 4, "ring-1": 4}
    assert max(rings.values()) >= wanted["exactly"]["count"]


def test_a_910b_server_with_20_ai_cores_is_not_what_it_asks_for(short_tmp: Path) -> None:
    wanted, _ = request()
    devices = published(short_tmp, "910B3", 20.0)
    assert not any(
        cel_selects(s["cel"]["expression"], d, DRIVER)
        for d in devices
        for s in wanted["exactly"]["selectors"]
    )
