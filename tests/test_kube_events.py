"""Node Events for device health transitions: content, rate limit, summary of the dropped ones."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from kube_harness import NODE, make_inventory, running, set_faults
from log_records import records
from waiting import until

from ascend_plugin.faces.kube.events import NodeEvents, TokenBucket
from ascend_plugin.faces.kube.publishers import EVENT_NAMESPACE
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.kubeapi.client import Kube

pytestmark = pytest.mark.anyio

SEPARATE = 0x80E01801


def reasons(apiserver: FakeApiServer) -> list[str]:
    return [event["reason"] for event in ordered(apiserver)]


def ordered(apiserver: FakeApiServer) -> list[dict[str, Any]]:
    return sorted(apiserver.events(), key=lambda event: int(event["metadata"]["resourceVersion"]))


def wired(kube: Kube, inventory: Inventory, bucket: TokenBucket | None = None) -> NodeEvents:
    events = NodeEvents(kube, NODE, inventory.table, EVENT_NAMESPACE, bucket)
    inventory.on_transition(events.on_transition)
    return events


async def test_each_transition_is_an_event_on_the_node(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    inventory = make_inventory(short_tmp)
    events = wired(kube, inventory)
    async with running(events.run):
        set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
        await until(lambda: reasons(apiserver) == ["NPUUnhealthy"], "the unhealthy event")
        set_faults(inventory, "Ascend310-0")
        await until(lambda: reasons(apiserver) == ["NPUUnhealthy", "NPUHealthy"], "the healthy event")

    unhealthy, healthy = ordered(apiserver)
    assert unhealthy["metadata"]["namespace"] == "default"
    assert unhealthy["metadata"]["name"].startswith(f"{NODE}.")
    assert unhealthy["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": NODE,
        "uid": f"uid-nodes-{NODE}",
    }
    assert unhealthy["type"] == "Warning"
    assert unhealthy["source"] == {"component": "ascend-device-plugin", "host": NODE}
    assert unhealthy["count"] == 1
    assert unhealthy["firstTimestamp"].endswith("Z")
    message = unhealthy["message"]
    assert "Ascend310-0 is unhealthy" in message
    assert "80E01801 (SeparateNPU)" in message
    assert "fault 80E01801:SeparateNPU" in message  # the inventory's reason

    assert healthy["type"] == "Normal"
    assert healthy["message"].startswith("Ascend310-0 is healthy again (was: fault 80E01801:SeparateNPU)")


async def test_a_flapping_chip_is_rate_limited_and_the_drops_summarised(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    inventory = make_inventory(short_tmp)
    events = wired(kube, inventory, TokenBucket(burst=3, rate=5.0))
    for flip in range(10):
        set_faults(inventory, "Ascend310-0", *([] if flip % 2 else [(SEPARATE, FaultLevel.SeparateNPU)]))
    assert events.dropped == 7
    async with running(events.run):
        await until(lambda: len(apiserver.events()) == 4, "three events and the summary")
    assert reasons(apiserver) == ["NPUUnhealthy", "NPUHealthy", "NPUUnhealthy", "NPUEventsDropped"]
    summary = ordered(apiserver)[-1]
    assert summary["type"] == "Warning"
    assert summary["message"].startswith("7 NPU health event(s) were not posted")
    assert events.dropped == 0


async def test_events_go_out_without_a_uid_when_the_node_cannot_be_read(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path
) -> None:
    apiserver.add_node(NODE)
    apiserver.inject(403, "get", "nodes")
    inventory = make_inventory(short_tmp)
    events = wired(kube, inventory)
    async with running(events.run):
        set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
        await until(lambda: len(apiserver.events()) == 1, "the event")
    assert "uid" not in apiserver.events()[0]["involvedObject"]


def test_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(burst=2, rate=0.5, clock=lambda: now[0])
    assert bucket.take()
    assert bucket.take()
    assert not bucket.take()
    assert bucket.wait_time() == pytest.approx(2.0)
    now[0] = 1.0
    assert not bucket.take()
    assert bucket.wait_time() == pytest.approx(1.0)
    now[0] = 2.0
    assert bucket.take()
    now[0] = 100.0  # never more than the burst
    assert [bucket.take() for _ in range(3)] == [True, True, False]


async def test_an_event_the_api_server_rejects_is_dropped_not_retried_forever(
    apiserver: FakeApiServer, kube: Kube, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.add_node(NODE)
    apiserver.inject(422, "create", "events", times=1)
    inventory = make_inventory(short_tmp)
    events = wired(kube, inventory)
    async with running(events.run):
        set_faults(inventory, "Ascend310-0", (SEPARATE, FaultLevel.SeparateNPU))
        set_faults(inventory, "Ascend310-0")
        await until(lambda: reasons(apiserver) == ["NPUHealthy"], "the second event")
    assert records(caplog, "ascend_plugin.faces.kube.events", level=logging.ERROR, reason="NPUUnhealthy")
    assert len(apiserver.requests_of("create", "events")) == 2
