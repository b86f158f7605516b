"""The loopback API server's watches and versions, checked against the real server's documented behaviour.

Bookmarks carry only a resourceVersion, in an object of the watched kind, and come
only when asked for, 2 s before the watch's timeout at the latest (the watch
cache's rule); resourceVersions may be opaque tokens, passed back unmodified; a
list in a namespace that does not exist is empty, where a get is 404.
"""

from __future__ import annotations

from contextlib import aclosing

import pytest
from fake_apiserver import FakeApiServer

from ascend_plugin.kubeapi.client import CONFIGMAPS, Kube, WatchEvent
from ascend_plugin.kubeapi.errors import ApiError, NotFound

pytestmark = pytest.mark.anyio


async def _events(kube: Kube, version: str, seconds: int) -> list[WatchEvent]:
    async with aclosing(kube.watch(CONFIGMAPS, "kube-system", "", version, seconds)) as stream:
        return [event async for event in stream]


async def test_a_bookmark_comes_before_the_watch_times_out_and_carries_only_a_version(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    listing = await kube.list(CONFIGMAPS, "kube-system", "")
    apiserver.put("configmaps", {"metadata": {"name": "a", "namespace": "kube-system"}})
    events = await _events(kube, listing.resource_version, 3)  # its bookmark is due 2 s before the end
    assert [event.type for event in events] == ["ADDED", "BOOKMARK"]
    assert events[1].object == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": apiserver.resource_version()},
    }


async def test_bookmarks_come_only_when_asked_for(apiserver: FakeApiServer) -> None:
    """The real client always asks (``allowWatchBookmarks=true``); a raw request without it gets none."""
    import aiohttp

    apiserver.bookmark_interval = 0.05  # asked for, some twenty would come within the second
    url = f"{apiserver.url}/api/v1/namespaces/kube-system/configmaps?watch=true&timeoutSeconds=1"
    headers = {"Authorization": f"Bearer {apiserver.token}"}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        body = await response.read()
    assert b"BOOKMARK" not in body
    assert apiserver.bookmarks_sent == 0


async def test_opaque_versions_are_tokens_a_watch_resumes_from(apiserver: FakeApiServer, kube: Kube) -> None:
    apiserver.opaque_versions = True
    first = apiserver.put("configmaps", {"metadata": {"name": "a", "namespace": "kube-system"}})
    second = apiserver.put(
        "configmaps", {"metadata": {"name": "a", "namespace": "kube-system"}, "data": {"k": "v"}}
    )
    versions = [first["metadata"]["resourceVersion"], second["metadata"]["resourceVersion"]]
    assert len(set(versions)) == 2
    assert not any(version.isdigit() for version in versions)
    events = await _events(kube, versions[0], 1)
    assert [(event.type, event.resource_version) for event in events] == [("MODIFIED", versions[1])]
    with pytest.raises(ApiError) as refused:
        await _events(kube, "1000", 1)  # a number this server never handed out
    assert refused.value.status == 400


async def test_a_list_in_a_missing_namespace_is_empty_and_a_get_there_is_404(kube: Kube) -> None:
    assert (await kube.list(CONFIGMAPS, "no-such-namespace", "")).items == []
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "anything", "no-such-namespace")
