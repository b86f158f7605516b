"""An older family's extended resource left on a 950 node (``huawei.com/Ascend910``) leaves its status.

Against the API server stand-in: one JSON patch of ``nodes/status`` removes it from capacity and
allocatable, testing each value first; said once in the log and as a node Event. Refused (403: the
chart's grant off), it is said with the kubectl command instead and not asked again; another failure is
retried with backoff; a resource put back again and again is left alone. Other families leave it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import make_inventory, running
from log_records import records
from waiting import until

from ascend_plugin.faces.kube.events import NodeEvents
from ascend_plugin.faces.kube.labels import NodeLabeller, node_reflector, plan_labels
from ascend_plugin.faces.kube.publishers import EVENT_NAMESPACE
from ascend_plugin.faces.kube.stale_resources import MAX_REMOVALS, REMOVED_REASON, StaleResources
from ascend_plugin.kubeapi.client import JSON_PATCH, Kube
from ascend_plugin.kubeapi.errors import ApiError
from backends.families.ascend950 import ASCEND_950

pytestmark = pytest.mark.anyio

NODE = "atlas-850"
STALE = "huawei.com/Ascend910"
STALE_LOG = "ascend_plugin.faces.kube.stale_resources"
NPU = "huawei.com/npu"


def _with_status(
    apiserver: FakeApiServer, capacity: Mapping[str, str], allocatable: Mapping[str, str]
) -> None:
    node = apiserver.get("nodes", NODE) or apiserver.add_node(NODE)
    node["status"] = {"capacity": dict(capacity), "allocatable": dict(allocatable)}
    apiserver.put("nodes", node)


def _unlabelled(
    apiserver: FakeApiServer, capacity: Mapping[str, str], allocatable: Mapping[str, str]
) -> None:
    """A new status, and the accelerator label gone: the labeller has judged the node once it is back."""
    node = apiserver.get("nodes", NODE)
    assert node is not None
    del node["metadata"]["labels"]["accelerator"]
    node["status"] = {"capacity": dict(capacity), "allocatable": dict(allocatable)}
    apiserver.put("nodes", node)


def _status(apiserver: FakeApiServer) -> dict[str, Any]:
    node = apiserver.get("nodes", NODE)
    assert node is not None
    return dict(node["status"])


def _labeller(
    kube: Kube, short_tmp: Path, family: str = "950", events: NodeEvents | None = None
) -> NodeLabeller:
    chip = "Ascend950PR" if family == "950" else "910B3"
    inventory = make_inventory(short_tmp, family=family, chip_name=chip, ai_cores={0: 32.0})
    plan = plan_labels(inventory, "ascend-device-plugin.io")
    return NodeLabeller(kube, node_reflector(kube, NODE), NODE, plan, events)


async def test_a_leftover_ascend910_leaves_capacity_and_allocatable_in_one_tested_patch(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _with_status(apiserver, {STALE: "8", NPU: "8", "cpu": "96"}, {STALE: "0", NPU: "8", "cpu": "95"})
    events = NodeEvents(kube, NODE, ASCEND_950, EVENT_NAMESPACE)
    labeller = _labeller(kube, short_tmp, events=events)
    with caplog.at_level(logging.INFO, logger=STALE_LOG):
        async with running(labeller.node.run, labeller.run, events.run):
            await until(lambda: STALE not in _status(apiserver)["capacity"], "the leftover removed")
            await until(apiserver.events, "the node Event")
    status = _status(apiserver)
    assert status == {"capacity": {NPU: "8", "cpu": "96"}, "allocatable": {NPU: "8", "cpu": "95"}}
    [patch] = apiserver.requests_of("patch", "nodes/status")
    assert patch.content_type == JSON_PATCH
    capacity, allocatable = (
        "/status/capacity/huawei.com~1Ascend910",
        "/status/allocatable/huawei.com~1Ascend910",
    )
    assert patch.body == [
        {"op": "test", "path": capacity, "value": "8"},
        {"op": "remove", "path": capacity},
        {"op": "test", "path": allocatable, "value": "0"},
        {"op": "remove", "path": allocatable},
    ]
    [said] = records(caplog, STALE_LOG, level=logging.INFO)
    assert said.getMessage() == (
        f"node {NODE}: removed from its status what an older family's plugin left: "
        f"{STALE} (capacity 8, allocatable 0)"
    )
    [event] = apiserver.events()
    assert (event["reason"], event["type"]) == (REMOVED_REASON, "Normal")
    assert f"{STALE} (capacity 8, allocatable 0)" in event["message"]


async def test_a_value_changed_since_it_was_seen_is_not_removed(apiserver: FakeApiServer, kube: Kube) -> None:
    """The kubelet set it to 0 after the plugin looked: the patch's test refuses the removal (422)."""
    _with_status(apiserver, {STALE: "0", NPU: "8"}, {STALE: "0", NPU: "8"})
    seen = {"status": {"capacity": {STALE: "8", NPU: "8"}, "allocatable": {STALE: "8", NPU: "8"}}}
    stale = StaleResources(kube, node_reflector(kube, NODE), NODE, (STALE,))
    with pytest.raises(ApiError) as refused:
        await stale.remove(seen)
    assert refused.value.status == 422
    assert _status(apiserver)["capacity"] == {STALE: "0", NPU: "8"}
    await stale.remove(apiserver.get("nodes", NODE) or {})  # judged again on what the server has now
    assert _status(apiserver) == {"capacity": {NPU: "8"}, "allocatable": {NPU: "8"}}


async def test_refused_it_is_said_once_with_the_command_that_removes_it(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.deny("patch", "nodes/status")
    _with_status(apiserver, {STALE: "8", "cpu": "96"}, {})
    labeller = _labeller(kube, short_tmp)
    with caplog.at_level(logging.WARNING, logger=STALE_LOG):
        async with running(labeller.node.run, labeller.run):
            await until(lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-npu", "labels")
            await until(lambda: apiserver.requests_of("patch", "nodes/status"), "the removal asked")
            labels = dict(apiserver.node_labels(NODE))
            await until(lambda: apiserver.node_labels(NODE) == labels, "the labeller's own patch seen back")
            _unlabelled(apiserver, {STALE: "8", "cpu": "96"}, {STALE: "8"})  # a change: judged again
            await until(lambda: apiserver.node_labels(NODE) == labels, "the labels put back")
    (said,) = records(caplog, STALE_LOG, resource=STALE)
    assert "still advertises huawei.com/Ascend910 (capacity 8)" in said.getMessage()
    assert '"path":"/status/capacity/huawei.com~1Ascend910"' in said.getMessage()
    assert 'cannot patch resource "nodes/status"' in said.getMessage()
    assert [request.status for request in apiserver.requests_of("patch", "nodes/status")] == [403]
    assert _status(apiserver)["capacity"] == {STALE: "8", "cpu": "96"}


async def test_another_failure_is_retried_with_backoff(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.inject(500, "patch", "nodes/status", times=1)
    _with_status(apiserver, {STALE: "8"}, {STALE: "8"})
    labeller = _labeller(kube, short_tmp)
    async with running(labeller.node.run, labeller.run):
        await until(lambda: STALE not in _status(apiserver)["capacity"], "removed on the second attempt")
    assert [request.status for request in apiserver.requests_of("patch", "nodes/status")] == [500, 200]
    assert _status(apiserver)["allocatable"] == {}


async def test_a_resource_put_back_again_and_again_is_left_alone(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubelet puts a removed resource back once; a plugin registered for it would forever."""
    _with_status(apiserver, {STALE: "8"}, {STALE: "8"})
    labeller = _labeller(kube, short_tmp)
    with caplog.at_level(logging.WARNING, logger=STALE_LOG):
        async with running(labeller.node.run, labeller.run):
            for removals in range(1, MAX_REMOVALS + 1):
                await until(lambda: STALE not in _status(apiserver)["capacity"], f"removal {removals}")
                _with_status(apiserver, {STALE: "8"}, {STALE: "8"})
            await until(lambda: records(caplog, STALE_LOG, resource=STALE), "said")
            labels = dict(apiserver.node_labels(NODE))
            _unlabelled(apiserver, {STALE: "8", "cpu": "96"}, {STALE: "8"})  # another change: still left
            await until(lambda: apiserver.node_labels(NODE) == labels, "the labels put back")
    assert len(apiserver.requests_of("patch", "nodes/status", 200)) == MAX_REMOVALS
    assert _status(apiserver)["capacity"] == {STALE: "8", "cpu": "96"}
    (said,) = records(caplog, STALE_LOG, resource=STALE)
    assert (
        f"is back in its status (capacity 8, allocatable 8) after {MAX_REMOVALS} removals"
        in said.getMessage()
    )


async def test_other_families_leave_it(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _with_status(apiserver, {STALE: "8"}, {STALE: "8"})
    labeller = _labeller(kube, short_tmp, family="910")
    with caplog.at_level(logging.INFO, logger=STALE_LOG):
        async with running(labeller.node.run, labeller.run):
            await until(
                lambda: apiserver.node_labels(NODE).get("accelerator") == "huawei-Ascend910", "labels"
            )
    assert records(caplog, STALE_LOG) == []
    assert apiserver.requests_of("patch", "nodes/status") == []
    assert _status(apiserver)["capacity"] == {STALE: "8"}
