"""The fake API server's pods behave as the real API server's do, through the real client.

Facts checked (from the Kubernetes API conventions and the watch cache): a
field-selected watch sends ADDED when an object comes to match and DELETED
(previous content, new resourceVersion) when it stops matching; an unsupported
field label is 400; a patch through the main resource leaves status alone; a
stale resourceVersion or another UID in a patch is 409; a missing pod is 404.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import pytest
from fake_apiserver import FakeApiServer

from ascend_plugin.kubeapi.client import PODS, Kube
from ascend_plugin.kubeapi.errors import ApiError, Conflict, NotFound

pytestmark = pytest.mark.anyio


def pod(name: str, node: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {"phase": phase}}


async def test_list_across_namespaces_by_node_and_phase(apiserver: FakeApiServer, kube: Kube) -> None:
    apiserver.put("pods", pod("a", "n1"))
    apiserver.put("pods", pod("b", "n2"))
    apiserver.put(
        "pods", pod("c", "n1", "Succeeded") | {"metadata": {"name": "c", "namespace": "kube-system"}}
    )
    on_n1 = await kube.list(PODS, None, "spec.nodeName=n1")
    assert sorted(item["metadata"]["name"] for item in on_n1.items) == ["a", "c"]  # type: ignore[index]
    running = await kube.list(PODS, None, "spec.nodeName=n1,status.phase!=Succeeded")
    assert [item["metadata"]["name"] for item in running.items] == ["a"]  # type: ignore[index]
    with pytest.raises(ApiError) as refused:
        await kube.list(PODS, None, "spec.bogus=1")
    assert refused.value.status == 400
    assert "field label not supported: spec.bogus" in refused.value.message


async def test_a_selected_watch_sees_binding_as_added_and_leaving_as_deleted(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    apiserver.put("pods", pod("p"))
    listing = await kube.list(PODS, None, "spec.nodeName=n1")
    assert listing.items == []
    bound = apiserver.get("pods", "p", "default")
    assert bound is not None
    bound["spec"]["nodeName"] = "n1"
    apiserver.put("pods", bound)
    finished = apiserver.get("pods", "p", "default")
    assert finished is not None
    finished["status"]["phase"] = "Succeeded"
    last = apiserver.put("pods", finished)
    seen = []
    stream = kube.watch(PODS, None, "spec.nodeName=n1,status.phase!=Succeeded", listing.resource_version, 1)
    async with aclosing(stream) as events:
        async for event in events:
            seen.append((event.type, event.object["spec"], event.object["status"], event.resource_version))
            if len(seen) == 2:
                break
    assert seen[0][0] == "ADDED"
    assert seen[1][0] == "DELETED"
    assert seen[1][2] == {"phase": "Pending"}  # the content it had while it matched
    assert seen[1][3] == last["metadata"]["resourceVersion"]


async def test_patches_keep_status_and_honour_preconditions(apiserver: FakeApiServer, kube: Kube) -> None:
    created = apiserver.put("pods", pod("p", "n1", "Running"))
    patched = await kube.patch(
        PODS, "p", "default", {"metadata": {"annotations": {"a": "1"}}, "status": {"phase": "Failed"}}
    )
    assert patched["status"] == {"phase": "Running"}  # type: ignore[comparison-overlap]
    assert patched["metadata"]["annotations"] == {"a": "1"}  # type: ignore[index]
    with pytest.raises(Conflict):
        await kube.patch(
            PODS, "p", "default", {"metadata": {"resourceVersion": "1", "annotations": {"a": "2"}}}
        )
    with pytest.raises(Conflict, match="Precondition failed: UID"):
        await kube.patch(PODS, "p", "default", {"metadata": {"uid": "another", "annotations": {"a": "2"}}})
    uid = created["metadata"]["uid"]
    await kube.patch(PODS, "p", "default", {"metadata": {"uid": uid, "annotations": {"a": None, "b": "2"}}})
    current = apiserver.get("pods", "p", "default")
    assert current is not None
    assert current["metadata"]["annotations"] == {"b": "2"}
    with pytest.raises(ApiError) as refused:
        await kube.patch(PODS, "p", "default", {"metadata": {"annotations": {"c": 3}}})
    assert refused.value.status == 400
    with pytest.raises(NotFound):
        await kube.patch(PODS, "gone", "default", {"metadata": {"annotations": {"a": "1"}}})
    with pytest.raises(NotFound):
        await kube.get(PODS, "gone", "default")
