"""Node labels: set, put back when removed or changed, servertype left alone, invalid values fixed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, make_inventory, running
from log_records import records
from waiting import until

from ascend_plugin.faces.kube.labels import (
    VALUE_RULE,
    NodeLabeller,
    key_is_valid,
    node_reflector,
    plan_labels,
    sanitise_value,
    value_is_valid,
)
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

PREFIX = "ascend-device-plugin.io"
LABELS = "ascend_plugin.faces.kube.labels"
EXPECTED_310B = {
    "accelerator": "huawei-Ascend310",
    "node.kubernetes.io/npu.chip.name": "310B1",
    "servertype": "Ascend310B-1",
    "huawei.com/driver.version": "24.1.rc1",
    f"{PREFIX}/ai-cores": "1",
    f"{PREFIX}/chip-count": "1",
}


def patches(apiserver: FakeApiServer) -> list[dict[str, str]]:
    """The labels of each node patch the plugin sent."""
    return [request.body["metadata"]["labels"] for request in apiserver.requests_of("patch", "nodes")]


async def test_a_310b_node_gets_its_labels_and_keeps_others(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE, {"kubernetes.io/hostname": NODE})
    labeller = NodeLabeller(
        kube, node_reflector(kube, NODE), NODE, plan_labels(make_inventory(short_tmp), PREFIX)
    )
    async with running(labeller.node.run, labeller.run):
        await until(lambda: len(apiserver.node_labels(NODE)) == 7, "labels on the node")
        assert apiserver.node_labels(NODE) == {"kubernetes.io/hostname": NODE, **EXPECTED_310B}
    # One strategic merge patch, of our labels only.
    assert patches(apiserver) == [EXPECTED_310B]
    request = apiserver.requests_of("patch", "nodes")[0]
    assert request.name == NODE
    assert request.content_type == "application/strategic-merge-patch+json"


async def test_a_removed_or_changed_label_is_put_back(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    labeller = NodeLabeller(
        kube, node_reflector(kube, NODE), NODE, plan_labels(make_inventory(short_tmp), PREFIX)
    )
    async with running(labeller.node.run, labeller.run):
        await until(lambda: apiserver.node_labels(NODE) == EXPECTED_310B, "labels on the node")

        node = apiserver.get("nodes", NODE)
        assert node is not None
        del node["metadata"]["labels"]["accelerator"]
        node["metadata"]["labels"][f"{PREFIX}/chip-count"] = "7"
        node["metadata"]["labels"]["team"] = "vision"
        apiserver.put("nodes", node)

        await until(
            lambda: apiserver.node_labels(NODE) == {**EXPECTED_310B, "team": "vision"}, "labels put back"
        )
    assert patches(apiserver)[1] == {"accelerator": "huawei-Ascend310", f"{PREFIX}/chip-count": "1"}


async def test_servertype_is_set_only_while_absent(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE, {"servertype": "Ascend310P-10-dual"})
    node_facts = make_inventory(
        short_tmp, family="310P", chip_name="310P3", phy_ids=(0, 1), ai_cores={0: 8.0, 1: 8.0}
    )
    labeller = NodeLabeller(kube, node_reflector(kube, NODE), NODE, plan_labels(node_facts, PREFIX))
    async with running(labeller.node.run, labeller.run):
        await until(lambda: "accelerator" in apiserver.node_labels(NODE), "labels on the node")
        labels = apiserver.node_labels(NODE)
        assert labels["servertype"] == "Ascend310P-10-dual"
        assert labels["accelerator"] == "huawei-Ascend310P"
        assert labels[f"{PREFIX}/chip-count"] == "2"
        assert labels[f"{PREFIX}/ai-cores"] == "8"

        node = apiserver.get("nodes", NODE)
        assert node is not None
        del node["metadata"]["labels"]["servertype"]
        apiserver.put("nodes", node)
        await until(lambda: apiserver.node_labels(NODE).get("servertype") == "Ascend310P-8", "servertype set")
    assert all("servertype" not in patch for patch in patches(apiserver)[:1])


async def test_labels_follow_once_the_node_exists(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    labeller = NodeLabeller(
        kube, node_reflector(kube, NODE), NODE, plan_labels(make_inventory(short_tmp), PREFIX)
    )
    async with running(labeller.node.run, labeller.run):
        await until(
            lambda: records(caplog, LABELS, level=logging.WARNING, node=NODE),
            "a warning about the missing node",
        )
        apiserver.add_node(NODE)
        await until(lambda: apiserver.node_labels(NODE) == EXPECTED_310B, "labels on the new node")


async def test_an_invalid_driver_version_is_sanitised_before_sending(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.add_node(NODE)
    node_facts = make_inventory(short_tmp, driver_version="24.1.RC1 (B020)")
    with caplog.at_level(logging.WARNING, logger="ascend_plugin.faces.kube.labels"):
        plan = plan_labels(node_facts, PREFIX)
    (fixed,) = records(
        caplog, LABELS, level=logging.WARNING, label="huawei.com/driver.version", value="24.1.RC1 (B020)"
    )
    assert VALUE_RULE in fixed.getMessage()  # what a label value may be
    labeller = NodeLabeller(kube, node_reflector(kube, NODE), NODE, plan)
    async with running(labeller.node.run, labeller.run):
        await until(lambda: "accelerator" in apiserver.node_labels(NODE), "labels on the node")
    assert apiserver.node_labels(NODE)["huawei.com/driver.version"] == "24.1.RC1-B020"


def test_a_value_with_nothing_usable_is_skipped_with_a_warning(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node_facts = make_inventory(short_tmp, driver_version="(unknown)")
    plan = plan_labels(node_facts, PREFIX)
    assert plan.enforced["huawei.com/driver.version"] == "unknown"

    node_facts = make_inventory(short_tmp, chip_name="???")
    with caplog.at_level(logging.WARNING, logger="ascend_plugin.faces.kube.labels"):
        plan = plan_labels(node_facts, PREFIX)
    assert "node.kubernetes.io/npu.chip.name" not in plan.enforced
    assert records(
        caplog, LABELS, level=logging.WARNING, label="node.kubernetes.io/npu.chip.name", value="???"
    )


def test_a_node_without_ai_core_figures_gets_no_servertype(short_tmp: Path) -> None:
    plan = plan_labels(make_inventory(short_tmp, ai_cores={}), PREFIX)
    assert "servertype" not in plan.if_absent
    assert f"{PREFIX}/ai-cores" not in plan.enforced
    assert plan.enforced["accelerator"] == "huawei-Ascend310"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("24.1.rc1", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-leading", False),
        ("trailing.", False),
        ("with space", False),
        ("Ascend310P-10-dual", True),
    ],
)
def test_label_value_syntax(value: str, valid: bool) -> None:
    assert value_is_valid(value) is valid


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("accelerator", True),
        ("huawei.com/driver.version", True),
        ("node.kubernetes.io/npu.chip.name", True),
        ("Upper.Case/name", False),
        ("/name", False),
        ("prefix/", False),
        (f"{'a' * 254}/name", False),
    ],
)
def test_label_key_syntax(key: str, valid: bool) -> None:
    assert key_is_valid(key) is valid


def test_sanitising_keeps_what_it_can() -> None:
    assert sanitise_value("24.1.RC1 B020") == "24.1.RC1-B020"
    assert sanitise_value("--x--") == "x"
    assert sanitise_value("v" + "1" * 70 + "-") == "v" + "1" * 62
    assert value_is_valid(sanitise_value("a" * 62 + "-b"))
