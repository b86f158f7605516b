"""The reflector against the loopback API server, through the real kubernetes-asyncio client.

A list, then a watch that keeps the store current; bookmarks that keep a quiet
watch resumable; 410 Gone answered by a new list; a dropped watch resumed from
its version; backoff counted in attempts; resourceVersions that are not numbers;
one named object that comes and goes; the answers of our own writes shown at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from fake_apiserver import FakeApiServer
from kube_harness import running
from waiting import WAIT, until

from ascend_plugin.kubeapi.client import CONFIGMAPS, JsonObject, Kube
from ascend_plugin.kubeapi.reflector import Reflector, named_object, object_key, unchanged
from ascend_plugin.kubeapi.retry import Retrier
from ascend_plugin.resilience import Backoff

pytestmark = pytest.mark.anyio

NAMESPACE = "kube-system"
FAULT_CONFIG = "mindx-dl-fault-config"
BACKOFF = Backoff(0.01, 0.04, jitter=lambda: 0.5)  # each wait half its ceiling


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE}, "data": dict(data)}


def key(name: str) -> str:
    return object_key(NAMESPACE, name)


class Sleeps:
    """The backoff's waits, recorded; each one yields to the loop without taking any time."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await anyio.lowlevel.checkpoint()


def reflector(kube: Kube, sleeps: Sleeps | None = None, **options: Any) -> Reflector[JsonObject]:
    """The ConfigMaps of kube-system, retried with a short backoff (waits recorded when ``sleeps``)."""
    retry = Retrier("test ConfigMaps", BACKOFF, sleep=sleeps or anyio.sleep)
    return Reflector(
        kube, CONFIGMAPS, unchanged, part="test ConfigMaps", namespace=NAMESPACE, retry=retry, **options
    )


def data_of(store_value: JsonObject | None) -> object:
    return None if store_value is None else store_value.get("data")


async def watching(apiserver: FakeApiServer, count: int = 1) -> None:
    """Until the server has had ``count`` watch requests of ConfigMaps (a switch thrown now reaches them)."""
    await until(lambda: len(apiserver.requests_of("watch", "configmaps")) >= count, f"watch number {count}")


@pytest.fixture(params=["numeric", "opaque"])
def versions(request: pytest.FixtureRequest, apiserver: FakeApiServer) -> str:
    """Each test below runs against numeric resourceVersions (etcd's) and against opaque ones."""
    apiserver.opaque_versions = request.param == "opaque"
    return str(request.param)


@pytest.fixture
async def following(kube: Kube, versions: str) -> AsyncIterator[Reflector[JsonObject]]:
    """A running reflector of kube-system's ConfigMaps."""
    assert versions
    configmaps = reflector(kube)
    async with running(configmaps.run):
        await until(lambda: configmaps.synced, "the first list")
        yield configmaps


async def test_a_list_then_the_watch_keeps_the_store_current(
    apiserver: FakeApiServer, kube: Kube, versions: str
) -> None:
    apiserver.put("configmaps", configmap("a", level="1"))
    apiserver.put("configmaps", configmap("b"))
    apiserver.put("configmaps", {"metadata": {"name": "elsewhere", "namespace": "default"}})
    listed = apiserver.resource_version()
    configmaps = reflector(kube)
    async with running(configmaps.run):
        await until(lambda: configmaps.synced, "the first list")
        assert set(configmaps.store) == {key("a"), key("b")}
        apiserver.put("configmaps", configmap("a", level="2"))
        apiserver.put("configmaps", configmap("c"))
        apiserver.delete("configmaps", "b", NAMESPACE)
        await until(lambda: set(configmaps.store) == {key("a"), key("c")}, "c added, b deleted")
        await until(lambda: data_of(configmaps.get(key("a"))) == {"level": "2"}, "a modified")
    assert configmaps.lists == 1
    watch = apiserver.requests_of("watch", "configmaps")[0]
    assert watch.query["allowWatchBookmarks"].lower() == "true"
    assert watch.query["resourceVersion"] == listed  # the list's


async def test_resource_versions_are_passed_back_as_the_server_wrote_them(
    apiserver: FakeApiServer, following: Reflector[JsonObject], versions: str
) -> None:
    apiserver.put("configmaps", configmap("a"))
    await until(lambda: following.get(key("a")) is not None, "a seen")
    stored = apiserver.get("configmaps", "a", NAMESPACE)
    assert stored is not None
    assert following.version == stored["metadata"]["resourceVersion"]
    assert following.version.isdigit() == (versions == "numeric")


async def test_a_reader_waits_for_the_next_change(
    apiserver: FakeApiServer, following: Reflector[JsonObject]
) -> None:
    seen = following.changes.version
    woken: list[int] = []

    async def reader() -> None:
        woken.append(await following.changes.wait_for_change(seen))

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            await anyio.lowlevel.checkpoint()
            assert not woken
            apiserver.put("configmaps", configmap("a"))
    assert woken
    assert woken[0] > seen
    assert following.get(key("a")) is not None


async def test_the_server_ending_a_watch_is_watched_again_from_its_version(
    apiserver: FakeApiServer, kube: Kube, versions: str
) -> None:
    now = [0.0]
    following = reflector(kube, clock=lambda: now[0])
    async with running(following.run):
        await watching(apiserver)
        now[0] += 180.0  # the watch has lasted its timeout
        apiserver.end_watches()  # as at the watch's timeout
        await watching(apiserver, 2)
        apiserver.put("configmaps", configmap("a"))
        await until(lambda: following.get(key("a")) is not None, "the change after the renewal")
    assert following.lists == 1
    assert following.retry.failures == 0
    first, second = apiserver.requests_of("watch", "configmaps")[:2]
    assert second.query["resourceVersion"] == first.query["resourceVersion"]  # nothing happened meanwhile


async def test_watch_timeouts_are_spread_between_once_and_twice_the_setting(
    kube: Kube, apiserver: FakeApiServer
) -> None:
    """A cluster's nodes must not all renew their watches in the same second."""
    configmaps = reflector(kube, watch_timeout=100)
    async with running(configmaps.run):
        for count in range(1, 6):
            await watching(apiserver, count)
            apiserver.end_watches()
    asked = {int(request.query["timeoutSeconds"]) for request in apiserver.requests_of("watch", "configmaps")}
    assert all(100 <= seconds < 200 for seconds in asked)


async def test_a_bookmark_keeps_a_quiet_watch_resumable_without_a_list(
    apiserver: FakeApiServer, kube: Kube, versions: str
) -> None:
    """Changes elsewhere move the server's version on; the bookmark moves ours with it."""
    quiet = named_object(kube, CONFIGMAPS, NAMESPACE, "quiet", part="a quiet ConfigMap")
    async with running(quiet.run):
        await watching(apiserver)
        listed_at = quiet.version
        for level in range(5):  # another ConfigMap of the namespace: nothing for this watch
            apiserver.put("configmaps", configmap("busy", level=str(level)))
        changes = quiet.changes.version
        apiserver.send_bookmarks()
        await until(lambda: quiet.bookmarks == 1, "the bookmark")
        bookmarked = quiet.version
        assert bookmarked == apiserver.resource_version() != listed_at
        assert quiet.changes.version == changes  # a bookmark changes nothing in the store
        apiserver.compact()  # the versions before the bookmark are gone from the server's history
        apiserver.end_watches()
        await watching(apiserver, 2)
        apiserver.put("configmaps", configmap("quiet"))
        await until(lambda: quiet.get(key("quiet")) is not None, "the change after the resumption")
    assert quiet.lists == 1
    assert apiserver.requests_of("watch", "configmaps")[1].query["resourceVersion"] == bookmarked


async def test_an_expired_version_lists_again_and_misses_nothing(
    apiserver: FakeApiServer, following: Reflector[JsonObject]
) -> None:
    apiserver.put("configmaps", configmap("goes"))
    await until(lambda: following.get(key("goes")) is not None, "goes seen")
    await watching(apiserver)
    apiserver.expire_watches()  # the watch ends, and its version is too old to resume from: 410
    apiserver.delete("configmaps", "goes", NAMESPACE)
    apiserver.put("configmaps", configmap("comes"))
    await until(lambda: following.lists == 2, "the list after 410 Gone")
    await until(lambda: set(following.store) == {key("comes")}, "the new list taken over")
    assert following.retry.failures == 0  # the watch had shown things since its list: relisted at once


async def test_a_server_that_answers_410_to_every_watch_is_listed_against_with_backoff(
    apiserver: FakeApiServer, kube: Kube, versions: str
) -> None:
    apiserver.inject(410, "watch", "configmaps")
    sleeps = Sleeps()
    configmaps = reflector(kube, sleeps)
    async with running(configmaps.run):
        await until(lambda: configmaps.retry.failures >= 4, "four refused watches")
        lists = configmaps.lists
    assert lists <= len(sleeps.delays) + 1  # never two lists without a wait between them
    # Ceilings doubling from 0.01 s up to 0.04 s, each wait drawn below its ceiling (here always half).
    assert sleeps.delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.02])


async def test_a_dropped_watch_is_watched_again_from_its_version(
    apiserver: FakeApiServer, following: Reflector[JsonObject]
) -> None:
    apiserver.put("configmaps", configmap("a", level="1"))
    await until(lambda: following.get(key("a")) is not None, "a seen")
    await watching(apiserver)
    apiserver.drop_watches()  # the connection cut mid-stream
    apiserver.put("configmaps", configmap("a", level="2"))
    await until(
        lambda: data_of(following.get(key("a"))) == {"level": "2"}, "the change made while it was down"
    )
    assert following.lists == 1
    assert following.retry.failures == 1
    resumed = apiserver.requests_of("watch", "configmaps")[-1]
    stored = apiserver.get("configmaps", "a", NAMESPACE)
    assert stored is not None
    assert resumed.query["resourceVersion"] != stored["metadata"]["resourceVersion"]  # from before the change


async def test_back_off_not_spin_attempts_are_counted_and_their_waits_grow(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    apiserver.inject(500, "list", "configmaps", times=3)
    apiserver.inject(503, "watch", "configmaps", times=2)
    sleeps = Sleeps()
    configmaps = reflector(kube, sleeps)
    async with running(configmaps.run):
        await watching(apiserver, 3)
        apiserver.put("configmaps", configmap("a"))
        await until(lambda: configmaps.get(key("a")) is not None, "the third watch working")
    assert len(apiserver.requests_of("list", "configmaps")) == 4
    assert len(apiserver.requests_of("watch", "configmaps")) == 3
    assert configmaps.retry.failures == 5
    # Ceilings doubling from 0.01 s, each wait half its ceiling here: the list's three, then the watch's
    # two, counted from one again once the list got through.
    assert sleeps.delays == pytest.approx([0.005, 0.01, 0.02, 0.005, 0.01])


async def test_a_named_object_that_does_not_exist_yet_comes_and_goes(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    fault_config = named_object(kube, CONFIGMAPS, NAMESPACE, FAULT_CONFIG, part="fault configuration")
    apiserver.put("configmaps", configmap("neighbour"))
    async with running(fault_config.run):
        await until(lambda: fault_config.synced, "the first list")
        assert fault_config.get(key(FAULT_CONFIG)) is None
        apiserver.put("configmaps", configmap(FAULT_CONFIG, PollInterval="10"))
        await until(lambda: data_of(fault_config.get(key(FAULT_CONFIG))) == {"PollInterval": "10"}, "created")
        apiserver.put("configmaps", configmap(FAULT_CONFIG, PollInterval="20"))
        await until(lambda: data_of(fault_config.get(key(FAULT_CONFIG))) == {"PollInterval": "20"}, "changed")
        apiserver.delete("configmaps", FAULT_CONFIG, NAMESPACE)
        await until(lambda: fault_config.get(key(FAULT_CONFIG)) is None, "deleted")
    assert set(fault_config.store) <= {key(FAULT_CONFIG)}  # the neighbour never entered the store
    assert all(r.query["fieldSelector"] == f"metadata.name={FAULT_CONFIG}" for r in apiserver.requests)


async def test_a_named_object_in_a_namespace_that_does_not_exist_is_simply_absent(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    absent = named_object(kube, CONFIGMAPS, "no-such-namespace", FAULT_CONFIG, part="fault configuration")
    async with running(absent.run):
        await watching(apiserver)
        await until(lambda: absent.synced, "listed")
    assert dict(absent.store) == {}
    assert absent.retry.failures == 0


async def test_a_reader_of_a_named_object_sees_its_state_after_each_change(
    apiserver: FakeApiServer, kube: Kube
) -> None:
    states: list[object] = []
    named = named_object(kube, CONFIGMAPS, NAMESPACE, FAULT_CONFIG, part="fault configuration")

    async def reader() -> None:  # as the node labels and the config ConfigMap read theirs
        await named.wait_synced()
        while True:
            seen = named.changes.version
            states.append(data_of(named.get(key(FAULT_CONFIG))))
            await named.changes.wait_for_change(seen)

    async with running(named.run, reader):
        await until(lambda: states == [None], "absent at first")
        apiserver.put("configmaps", configmap(FAULT_CONFIG, a="1"))
        await until(lambda: states[-1] == {"a": "1"}, "created")
        apiserver.delete("configmaps", FAULT_CONFIG, NAMESPACE)
        await until(lambda: states[-1] is None, "deleted")
    assert states == [None, {"a": "1"}, None]


async def test_an_answer_shows_at_once_and_never_hides_a_later_change(
    apiserver: FakeApiServer, kube: Kube, following: Reflector[JsonObject]
) -> None:
    created = await following.record_write(kube.create(CONFIGMAPS, NAMESPACE, configmap("ours", v="1")))
    assert following.get(key("ours")) == created  # before or after the watch's echo: in the store now
    apiserver.put("configmaps", configmap("ours", v="someone else's"))
    await until(lambda: data_of(following.get(key("ours"))) == {"v": "someone else's"}, "the later change")
    current = apiserver.get("configmaps", "ours", NAMESPACE)
    assert current is not None
    updated = await following.record_write(
        kube.replace(CONFIGMAPS, "ours", NAMESPACE, {**current, "data": {"v": "2"}})
    )
    assert data_of(following.get(key("ours"))) == {"v": "2"} == data_of(updated)
    apiserver.put("configmaps", configmap("ours", v="3"))
    await until(
        lambda: data_of(following.get(key("ours"))) == {"v": "3"}, "the change after our second write"
    )


async def test_an_answer_that_comes_after_the_watch_moved_on_does_not_take_the_store_back(
    apiserver: FakeApiServer, kube: Kube, following: Reflector[JsonObject]
) -> None:
    """The watch shows our create, then someone's change, all before the create's own answer arrives."""
    held = apiserver.hold("create", "configmaps")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(following.record_write, kube.create(CONFIGMAPS, NAMESPACE, configmap("ours", v="1")))
        await until(lambda: data_of(following.get(key("ours"))) == {"v": "1"}, "the watch showing our create")
        apiserver.put("configmaps", configmap("ours", v="later"))
        await until(lambda: data_of(following.get(key("ours"))) == {"v": "later"}, "the later change")
        assert held.waiting == 1
        held.release()
    assert data_of(following.get(key("ours"))) == {"v": "later"}


async def test_a_read_answered_before_a_change_the_watch_already_showed_does_not_take_the_store_back(
    apiserver: FakeApiServer, kube: Kube, following: Reflector[JsonObject]
) -> None:
    apiserver.put("configmaps", configmap("theirs", v="1"))
    await until(lambda: following.get(key("theirs")) is not None, "theirs seen")
    held = apiserver.hold("get", "configmaps")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(following.read, "theirs")
        await until(lambda: held.waiting == 1, "the read answered, its answer held")
        apiserver.put("configmaps", configmap("theirs", v="2"))
        await until(lambda: data_of(following.get(key("theirs"))) == {"v": "2"}, "the change")
        held.release()
    assert data_of(following.get(key("theirs"))) == {"v": "2"}


async def test_an_object_we_learn_is_gone_leaves_the_store_at_once_and_may_come_back(
    apiserver: FakeApiServer, following: Reflector[JsonObject]
) -> None:
    apiserver.put("configmaps", configmap("doomed"))
    await until(lambda: following.get(key("doomed")) is not None, "doomed seen")
    following.record_gone(key("doomed"))
    assert following.get(key("doomed")) is None
    apiserver.delete("configmaps", "doomed", NAMESPACE)
    apiserver.put("configmaps", configmap("doomed", again="yes"))  # re-created after the DELETED event
    await until(lambda: data_of(following.get(key("doomed"))) == {"again": "yes"}, "back")


async def test_a_relist_takes_the_server_s_state_over(
    apiserver: FakeApiServer, following: Reflector[JsonObject]
) -> None:
    apiserver.put("configmaps", configmap("a"))
    store = await following.relist()
    assert key("a") in store
    assert following.lists == 2
