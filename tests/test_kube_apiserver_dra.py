"""The fake API server's resource.k8s.io/v1 behaves as the real one does, for what a node driver can see.

The DRA tests trust the fake to refuse what the real API server refuses and to
drop what it drops; these tests hold it to the API's facts (k8s.io/api
resource/v1 types and limits, the ResourceSlice registry strategy), through the
plugin's real client.
"""

from __future__ import annotations

import re
import uuid
from contextlib import aclosing
from typing import Any

import pytest

from ascend_plugin.kubeapi.client import RESOURCE_SLICES, Kube, WatchEvent
from ascend_plugin.kubeapi.errors import ApiError, Conflict, Forbidden
from ascend_plugin.testing.kube_apiserver import FakeApiServer
from ascend_plugin.testing.resource_api import DEVICE_TAINTS

pytestmark = pytest.mark.anyio


def slice_body(devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": "npu.huawei.com-node-1-"},
        "spec": {
            "driver": "npu.huawei.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices if devices is not None else [{"name": "npu-0"}],
        },
    }
    body["spec"].update(spec)
    return body


TAINTED = [{"name": "npu-0", "taints": [{"key": "npu.huawei.com/unhealthy", "effect": "NoSchedule"}]}]


async def test_create_with_generate_name_as_the_server_names_it(kube: Kube) -> None:
    stored = await kube.create(RESOURCE_SLICES, "", slice_body())
    metadata = stored["metadata"]
    assert re.fullmatch(r"npu\.huawei\.com-node-1-[bcdfghjklmnpqrstvwxz2456789]{5}", metadata["name"])
    assert metadata["generation"] == 1
    assert uuid.UUID(metadata["uid"])
    assert stored["apiVersion"] == "resource.k8s.io/v1"


async def test_taints_are_dropped_while_the_gate_is_off(kube: Kube, apiserver: FakeApiServer) -> None:
    stored = await kube.create(RESOURCE_SLICES, "", slice_body(TAINTED))
    assert "taints" not in stored["spec"]["devices"][0]
    apiserver.gates[DEVICE_TAINTS] = True
    stored = await kube.create(RESOURCE_SLICES, "", slice_body(TAINTED))
    (taint,) = stored["spec"]["devices"][0]["taints"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", taint["timeAdded"]), "the server stamps timeAdded"


async def test_taints_in_use_survive_an_update_with_the_gate_off(
    kube: Kube, apiserver: FakeApiServer
) -> None:
    """strategy.go drops them only when the old object had none (a downgraded cluster keeps what it had)."""
    apiserver.gates[DEVICE_TAINTS] = True
    stored = await kube.create(RESOURCE_SLICES, "", slice_body(TAINTED))
    apiserver.gates[DEVICE_TAINTS] = False
    stored["spec"]["devices"].append({"name": "npu-1", "taints": [{"key": "k", "effect": "NoExecute"}]})
    updated = await kube.replace(RESOURCE_SLICES, stored["metadata"]["name"], "", stored)
    assert [len(device.get("taints", [])) for device in updated["spec"]["devices"]] == [1, 1]
    assert updated["metadata"]["generation"] == 2


async def test_capacity_is_stored_in_canonical_form(kube: Kube) -> None:
    stored = await kube.create(
        RESOURCE_SLICES, "", slice_body([{"name": "npu-0", "capacity": {"memory": {"value": "65536Mi"}}}])
    )
    assert stored["spec"]["devices"][0]["capacity"]["memory"]["value"] == "64Gi"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            slice_body([{"name": f"npu-{n}"} for n in range(129)]),
            "spec.devices: Too many: 129: must have at most 128",
        ),
        (
            slice_body([{"name": "npu-0", "attributes": {f"a{n}": {"int": n} for n in range(33)}}]),
            "Too many: 33",
        ),
        (slice_body([{"name": "npu-0", "attributes": {"ai-cores": {"int": 1}}}]), "must be a C identifier"),
        (
            slice_body([{"name": "npu-0", "attributes": {"x": {"string": "s" * 65}}}]),
            "may not be more than 64",
        ),
        (
            slice_body([{"name": "npu-0", "attributes": {"x": {"int": 1, "string": "1"}}}]),
            "exactly one value",
        ),
        (slice_body([{"name": "NPU_0"}]), "spec.devices[0].name: Invalid value"),
        (slice_body([{"name": "npu-0"}, {"name": "npu-0"}]), "Duplicate value: 'npu-0'"),
        (slice_body(allNodes=True), "exactly one of `nodeName`, `nodeSelector`, `allNodes`"),
        (slice_body(driver="NPU"), "spec.driver: Invalid value"),
        (
            slice_body([{"name": "npu-0", "taints": [{"key": "k", "effect": "NoScale"}]}]),
            'supported values: "NoExecute", "NoSchedule"',
        ),
    ],
    ids=[
        "129 devices",
        "33 attributes",
        "attribute name",
        "long string",
        "two values",
        "device name",
        "duplicate device",
        "two node selections",
        "driver name",
        "taint effect",
    ],
)
async def test_invalid_slices_are_refused_with_the_field(
    kube: Kube, apiserver: FakeApiServer, body: dict[str, Any], problem: str
) -> None:
    apiserver.gates[DEVICE_TAINTS] = True
    with pytest.raises(ApiError) as raised:
        await kube.create(RESOURCE_SLICES, "", body)
    assert raised.value.status == 422
    assert problem in str(raised.value)


async def test_64_devices_once_one_has_a_taint(kube: Kube, apiserver: FakeApiServer) -> None:
    apiserver.kube_version = "1.35"
    apiserver.gates[DEVICE_TAINTS] = True
    devices = [{"name": f"npu-{n}"} for n in range(65)]
    devices[3]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    with pytest.raises(ApiError, match="Too many: 65: must have at most 64"):
        await kube.create(RESOURCE_SLICES, "", slice_body(devices))


async def test_driver_pool_and_node_are_immutable(kube: Kube) -> None:
    stored = await kube.create(RESOURCE_SLICES, "", slice_body())
    stored["spec"]["driver"] = "gpu.example.com"
    with pytest.raises(
        ApiError, match=r"spec\.driver: Invalid value: 'gpu\.example\.com': field is immutable"
    ):
        await kube.replace(RESOURCE_SLICES, stored["metadata"]["name"], "", stored)


async def test_field_selectors_on_driver_and_node(kube: Kube) -> None:
    await kube.create(RESOURCE_SLICES, "", slice_body())
    await kube.create(RESOURCE_SLICES, "", slice_body(driver="gpu.example.com"))
    await kube.create(
        RESOURCE_SLICES,
        "",
        slice_body(nodeName="node-2", pool={"name": "node-2", "generation": 1, "resourceSliceCount": 1}),
    )
    ours = await kube.list(RESOURCE_SLICES, None, "spec.driver=npu.huawei.com,spec.nodeName=node-1")
    assert [(s["spec"]["driver"], s["spec"]["nodeName"]) for s in ours.items] == [
        ("npu.huawei.com", "node-1")
    ]
    others = await kube.list(RESOURCE_SLICES, None, "spec.driver!=npu.huawei.com")
    assert [s["spec"]["driver"] for s in others.items] == ["gpu.example.com"]
    with pytest.raises(ApiError, match=r"field label not supported: spec\.pool\.name") as raised:
        await kube.list(RESOURCE_SLICES, None, "spec.pool.name=node-1")
    assert raised.value.status == 400


async def test_a_watch_sees_the_kubelet_s_deletecollection(kube: Kube, apiserver: FakeApiServer) -> None:
    first = await kube.create(RESOURCE_SLICES, "", slice_body())
    listing = await kube.list(RESOURCE_SLICES, None, "spec.nodeName=node-1")
    assert apiserver.wipe_slices("node-1") == 1
    events: list[WatchEvent] = []
    stream = kube.watch(
        RESOURCE_SLICES, None, "spec.nodeName=node-1", listing.resource_version, timeout_seconds=1
    )
    async with aclosing(stream) as watched:
        async for event in watched:
            events.append(event)
            break
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("DELETED", first["metadata"]["name"])
    ]


async def test_delete_preconditions_protect_a_changed_slice(kube: Kube) -> None:
    stored = await kube.create(RESOURCE_SLICES, "", slice_body())
    name = stored["metadata"]["name"]
    stored["spec"]["devices"].append({"name": "npu-1"})
    updated = await kube.replace(RESOURCE_SLICES, name, "", stored)
    with pytest.raises(Conflict, match="Precondition failed: ResourceVersion in precondition"):
        await kube.delete(
            RESOURCE_SLICES,
            name,
            None,
            {"uid": stored["metadata"]["uid"], "resourceVersion": stored["metadata"]["resourceVersion"]},
        )
    await kube.delete(
        RESOURCE_SLICES,
        name,
        None,
        {"uid": updated["metadata"]["uid"], "resourceVersion": updated["metadata"]["resourceVersion"]},
    )
    assert (await kube.list(RESOURCE_SLICES, None, "")).items == []


async def test_a_refusal_names_the_api_group(kube: Kube, apiserver: FakeApiServer) -> None:
    apiserver.deny("create", "resourceslices")
    with pytest.raises(Forbidden) as raised:
        await kube.create(RESOURCE_SLICES, "", slice_body())
    assert 'in API group "resource.k8s.io"' in raised.value.message
    assert '{apiGroups: ["resource.k8s.io"], resources: ["resourceslices"], verbs: ["create"]}' in str(
        raised.value
    )
