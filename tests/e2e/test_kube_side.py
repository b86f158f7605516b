"""What the plugin writes to the real API server, with the chart's RBAC and nothing more.

Node labels, the device-info ConfigMap (checked as Volcano reads it: the CheckCode over the
DeviceInfo, the devices less the unhealthy ones), the node's Events, Huawei's fault configuration
ConfigMap followed as it changes. Every call is the chart's ServiceAccount's: a permission the
chart forgot shows as a refused write here, and the plugin's log must hold no refusal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from api import Api, ApiError
from chart_harness import ChartRenderer
from cluster import Cluster
from node_plugin import NAMESPACE, NodePlugin, node_plugin, wait_for
from pods import node_resources

from backends.fake import FakeChip, FakeScenario

RESOURCE = "huawei.com/Ascend910"
DEVICE_INFO = "mindx-dl-deviceinfo-{node}"
FAULT_CONFIG = "mindx-dl-fault-config"
SEPARATE = "80E3A201"  # SeparateNPU in Huawei's built-in faultCode.json


def scenario(codes_on_3: tuple[str, ...] = ()) -> FakeScenario:
    chips = [FakeChip(phy_id=phy, fault_codes=codes_on_3 if phy == 3 else ()) for phy in range(8)]
    return FakeScenario(chip_name="910B3", chips=tuple(chips))


@pytest.fixture(scope="module")
def plugin(
    cluster: Cluster, chart: ChartRenderer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodePlugin]:
    rendering = chart.render_file("values-910.yaml")
    with node_plugin(cluster, rendering, scenario(), tmp_path_factory.mktemp("plugin")) as running_plugin:
        yield running_plugin


def as_volcano_reads_it(api: Api, node: str) -> dict[str, Any] | None:
    """The device-info document once its CheckCode holds (Volcano drops a document whose code is wrong)."""
    found = api.read("v1", "ConfigMap", DEVICE_INFO.format(node=node), NAMESPACE)
    if found is None:
        return None
    document: dict[str, Any] = json.loads(found["data"]["DeviceInfoCfg"])
    canonical = json.dumps(document["DeviceInfo"], separators=(",", ":"), sort_keys=True)
    assert document["CheckCode"] == hashlib.sha256(canonical.encode()).hexdigest(), "CheckCode"
    return document


def usable(document: dict[str, Any]) -> set[str]:
    """The devices Volcano may place on: those listed, less the unhealthy and network-unhealthy ones."""
    listed = document["DeviceInfo"]["DeviceList"]

    def names(key: str) -> set[str]:
        return {name for name in listed.get(key, "").split(",") if name}

    return names(RESOURCE) - names(f"{RESOURCE}-Unhealthy") - names(f"{RESOURCE}-NetworkUnhealthy")


def reasons(api: Api, node: str) -> list[str]:
    events = api.list("v1", "Event", NAMESPACE, fieldSelector=f"involvedObject.name={node}")
    events += api.list("v1", "Event", "default", fieldSelector=f"involvedObject.name={node}")
    ordered = sorted(
        events, key=lambda event: event.get("lastTimestamp") or event["metadata"]["creationTimestamp"]
    )
    return [event["reason"] for event in ordered]


def test_the_node_is_labelled(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    labels = wait_for(
        lambda: (
            (api.read("v1", "Node", cluster.node) or {})["metadata"].get("labels", {}).get("servertype")
            and api.read("v1", "Node", cluster.node)["metadata"]["labels"]
        ),  # type: ignore[index]
        "the node's Ascend labels",
    )
    assert labels["accelerator"] == "huawei-Ascend910"
    assert labels["node.kubernetes.io/npu.chip.name"] == "910B3"
    assert labels["huawei.com/driver.version"] == "24.1.rc1"


def test_the_device_info_configmap_reads_as_volcano_reads_it(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    document = wait_for(lambda: as_volcano_reads_it(api, cluster.node), "the device-info ConfigMap")
    assert usable(document) == {f"Ascend910-{phy}" for phy in range(8)}


def test_a_fault_reaches_the_configmap_and_the_node_events(cluster: Cluster, plugin: NodePlugin) -> None:
    api = cluster.admin()
    plugin.update(scenario(codes_on_3=(SEPARATE,)))
    wait_for(lambda: "Ascend910-3" not in usable(as_volcano_reads_it(api, cluster.node) or {}), "chip 3 out")
    document = as_volcano_reads_it(api, cluster.node)
    assert document is not None
    faults = json.loads(document["DeviceInfo"]["DeviceList"][f"{RESOURCE}-Fault"])
    assert [fault["fault_code"] for fault in faults] == [SEPARATE]
    wait_for(lambda: "NPUUnhealthy" in reasons(api, cluster.node), "the NPUUnhealthy Event")
    wait_for(lambda: node_resources(api, cluster.node, RESOURCE) == (8, 7), "allocatable 7")


def test_the_fault_configuration_configmap_is_followed(cluster: Cluster, plugin: NodePlugin) -> None:
    """An operator moves the code to NotHandleFaultCodes: the chip is back; the ConfigMap gone, out again."""
    api = cluster.admin()
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": FAULT_CONFIG, "namespace": NAMESPACE},
        "data": {"faultCode.json": json.dumps({"NotHandleFaultCodes": [SEPARATE]})},
    }
    api.create(config)
    wait_for(lambda: "Ascend910-3" in usable(as_volcano_reads_it(api, cluster.node) or {}), "chip 3 back")
    wait_for(lambda: "NPUHealthy" in reasons(api, cluster.node), "the NPUHealthy Event")
    api.delete("v1", "ConfigMap", FAULT_CONFIG, NAMESPACE)
    wait_for(lambda: "Ascend910-3" not in usable(as_volcano_reads_it(api, cluster.node) or {}), "out again")
    plugin.update(scenario())


def test_the_chart_rbac_was_enough_and_grants_no_more(cluster: Cluster, plugin: NodePlugin) -> None:
    refusals = [line for line in plugin.lines() if "forbidden" in json.dumps(line).lower()]
    assert not refusals, refusals[:3]
    token = plugin.kubeconfig.read_text(encoding="utf-8").split("token: ", 1)[1].split()[0]
    as_plugin = cluster.admin().as_user(token)
    with pytest.raises(ApiError) as refused:
        as_plugin.list("v1", "Secret", NAMESPACE)
    assert refused.value.status == 403
    with pytest.raises(ApiError) as refused:
        as_plugin.create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"}}
        )
    assert refused.value.status == 403
