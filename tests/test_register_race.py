"""A Register that can no longer succeed is given up at once, not waited out.

A kubelet restart can delete the plugin's socket just as the plugin sends
Register (the new kubelet wipes the directory while the request is on its
way), or bring up a new ``kubelet.sock`` while Register is pending. The
kubelet's dial-back then waits out its 10 s timeout for a socket that is not
there; a plugin that waits with it is unregistered all that time, and pods
admitted meanwhile fail. The plugin must see the change while Register is
pending and start over at once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_faults import FaultyKubelet
from plugin_harness import FakeNode, registered, running_plugin
from waiting import WAIT, until, wait_for

from ascend_plugin.faces.deviceplugin.registrar import REGISTER_BACKOFF

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


@pytest.fixture
def faulty_kubelet(plugin_dir: Path) -> Iterator[FaultyKubelet]:
    kubelet = FaultyKubelet(plugin_dir)
    kubelet.start()
    yield kubelet
    kubelet.before_dial_back(None)
    kubelet.stop()


async def test_socket_deleted_before_the_dial_back_is_re_created_and_registered_while_that_one_waits(
    faulty_kubelet: FaultyKubelet, node: FakeNode, plugin_dir: Path
) -> None:
    deleted: list[Path] = []

    def wipe_once(plugin_socket: Path) -> None:
        if not deleted:  # the new kubelet deletes every socket, once, while Register is on its way
            plugin_socket.unlink()
            deleted.append(plugin_socket)

    faulty_kubelet.before_dial_back(wipe_once)
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(faulty_kubelet, lambda k: len(k.calls) >= 2, "a second Register")
        first, second = faulty_kubelet.calls[:2]
        # The plugin did not wait for the first dial-back to give up: it re-created its socket and
        # sent the next Register while the first was still pending, or so fast that the first
        # dial-back itself found the new socket.
        assert first.finished is None or second.received < first.finished or first.outcome == "OK"
        await wait_for(faulty_kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.face is not None and app.face.registered, "the plugin sees it registered")
        # The first call's dial-back reaches the new socket once grpcio retries; wait it out so the
        # stand-in's threads end with the test.
        await wait_for(faulty_kubelet, lambda k: not k.pending_calls(), "every Register answered")
        await wait_for(faulty_kubelet, registered(RESOURCE), "still registered")
    assert deleted == [plugin_dir / "Ascend310.sock"]


async def test_a_new_kubelet_sock_while_register_is_pending_starts_over_at_once(
    faulty_kubelet: FaultyKubelet, node: FakeNode, plugin_dir: Path
) -> None:
    release = threading.Event()
    held: list[Path] = []

    def hold_the_first(plugin_socket: Path) -> None:
        if not held:  # the first Register hangs in the old kubelet, which never answers it
            held.append(plugin_socket)
            release.wait(WAIT)

    faulty_kubelet.before_dial_back(hold_the_first)
    try:
        async with running_plugin(node.settings(plugin_dir)) as app:
            await wait_for(faulty_kubelet, lambda k: bool(k.pending_calls()), "a pending Register")
            faulty_kubelet.relisten()  # a new kubelet.sock; the old listener keeps the pending call
            await wait_for(faulty_kubelet, registered(RESOURCE), "registration through the new kubelet.sock")
            assert faulty_kubelet.pending_calls(), "the plugin waited for the held Register to end"
            await until(lambda: app.face is not None and app.face.registered, "the plugin sees it registered")
            release.set()
            await wait_for(faulty_kubelet, lambda k: not k.pending_calls(), "every Register answered")
    finally:
        release.set()


async def test_a_socket_deleted_before_every_dial_back_makes_the_plugin_back_off_not_spin(
    faulty_kubelet: FaultyKubelet, node: FakeNode, plugin_dir: Path
) -> None:
    """Something that keeps deleting our socket (an old plugin without the lock) meets backoff."""
    wiped: list[Path] = []

    def wipe_three_times(plugin_socket: Path) -> None:
        if len(wiped) < 3:
            plugin_socket.unlink(missing_ok=True)
            wiped.append(plugin_socket)

    faulty_kubelet.before_dial_back(wipe_three_times)
    async with running_plugin(node.settings(plugin_dir)) as app:
        # An abandoned Register's dial-back may still reach a later socket and register on the
        # kubelet's side: what counts is the plugin's own Register answered, after the third wipe.
        await until(
            lambda: len(wiped) == 3 and app.face is not None and app.face.registered,
            "the plugin registered once the wiping stopped",
        )
        await wait_for(faulty_kubelet, lambda k: not k.pending_calls(), "every Register answered")
        await wait_for(faulty_kubelet, registered(RESOURCE), "registered")
    # Counted on the kubelet's side: each wipe cost one more Register, no more.
    calls = faulty_kubelet.calls
    assert len(calls) == len(wiped) + 1
    # The first abandon is registered again at once; from the second on, the next Register waits for
    # the backoff (it is sent after the sleep, which starts after the abandoned call arrived).
    gaps = [later.received - earlier.received for earlier, later in itertools.pairwise(calls)]
    assert gaps[1] >= REGISTER_BACKOFF.after(1)
    assert gaps[2] >= REGISTER_BACKOFF.after(2)
