"""One plugin per device-plugin directory: a second instance waits, leaves the first's socket, takes over.

Two real ``ascend-device-plugin run`` processes on one directory, as during a
DaemonSet rollout whose old pod is still terminating, with the grpcio kubelet
stand-in counting registrations: without the lock the two delete each other's
socket and register hundreds of times a minute. Then the lock itself, in one
process: what it says while it waits, and a directory it cannot lock yet.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from log_records import lines
from plugin_harness import FakeNode, registered
from plugin_process import PluginProcess, plugin_process
from waiting import WAIT, eventually, until

from ascend_plugin.grpc_sockets import file_stamp
from ascend_plugin.instance_lock import HOLDER_NOTE, InstanceLock
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"
LOCK = "ascend_plugin.instance_lock"


def readiness_until(plugin: PluginProcess, wanted: int, text: str) -> str:
    """/readyz's body, once it answers ``wanted`` with ``text`` in the body."""
    last: list[tuple[int, str] | None] = [None]

    def answered() -> str | None:
        try:
            last[0] = plugin.readiness()
        except OSError:  # the endpoint is not listening yet
            last[0] = None
            return None
        status, body = last[0]
        return body if status == wanted and text in body else None

    return eventually(
        answered, f"/readyz answering {wanted} with {text!r}", every=0.05, explain=lambda: f"last: {last[0]}"
    )


def waits(line: dict[str, Any]) -> bool:
    """A line of an instance waiting for the lock: it names the holder."""
    return bool(lines([line], LOCK)) and "holder_pid" in line


def holder_pid(plugin_dir: Path) -> int:
    pid: int = json.loads((plugin_dir / HOLDER_NOTE).read_text())["pid"]
    return pid


@pytest.mark.slow
def test_a_second_instance_waits_for_the_lock_and_takes_over_when_the_first_exits(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    our_socket = plugin_dir / "Ascend310.sock"
    with plugin_process(node, plugin_dir, short_tmp / "first.log") as first:
        kubelet.wait_until(registered(RESOURCE), WAIT, "the first instance registers")
        served = file_stamp(our_socket)
        assert holder_pid(plugin_dir) == first.pid

        with plugin_process(node, plugin_dir, short_tmp / "second.log", http=True) as second:
            waiting = second.wait_for_line(waits, "the second instance waits")
            assert (waiting["level"], waiting["holder_pid"]) == ("WARNING", first.pid)
            assert waiting["holder_host"]
            body = readiness_until(second, 503, "waiting for the lock held by")
            assert body.startswith(f"waiting for the lock held by pid {first.pid} (host ")

            # While it waits, the first keeps its socket, its stream and its one registration.
            assert file_stamp(our_socket) == served
            assert len(kubelet.registrations) == 1
            assert kubelet.resources[RESOURCE].stream_open

            first.process.send_signal(signal.SIGTERM)
            assert first.process.wait(timeout=WAIT) == 0
            kubelet.wait_until(registered(RESOURCE, times=2), WAIT, "the second instance registers")
            took = second.wait_for_line(
                lambda line: bool(lines([line], LOCK, level="INFO")) and "waited" in line, "takeover"
            )
            assert took["waited"] > 0
            readiness_until(second, 200, "ready")
            # No livelock: the takeover is one registration, and the socket is the second's now.
            assert len(kubelet.registrations) == 2
            assert file_stamp(our_socket) not in (None, served)
            assert holder_pid(plugin_dir) == second.pid

            second.process.send_signal(signal.SIGTERM)
            assert second.process.wait(timeout=WAIT) == 0
    assert not our_socket.exists()
    assert not (plugin_dir / HOLDER_NOTE).exists()
    assert len(kubelet.registrations) == 2


@pytest.mark.slow
def test_a_waiting_instance_stopped_exits_cleanly_and_leaves_the_first_alone(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    with plugin_process(node, plugin_dir, short_tmp / "first.log") as first:
        kubelet.wait_until(registered(RESOURCE), WAIT, "the first instance registers")
        served = file_stamp(plugin_dir / "Ascend310.sock")
        with plugin_process(node, plugin_dir, short_tmp / "second.log") as second:
            second.wait_for_line(waits, "the wait")
            second.process.send_signal(signal.SIGTERM)
            assert second.process.wait(timeout=WAIT) == 0
        assert file_stamp(plugin_dir / "Ascend310.sock") == served
        assert holder_pid(plugin_dir) == first.pid
        assert len(kubelet.registrations) == 1
        assert first.process.poll() is None


@pytest.mark.slow
def test_an_instance_killed_outright_leaves_the_lock_free(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    """The kernel releases a flock with its process: SIGKILL leaves nothing that blocks the next one."""
    with plugin_process(node, plugin_dir, short_tmp / "first.log") as first:
        kubelet.wait_until(registered(RESOURCE), WAIT, "the first instance registers")
        first.process.kill()
        first.process.wait()
    with plugin_process(node, plugin_dir, short_tmp / "second.log") as second:
        kubelet.wait_until(registered(RESOURCE, times=2), WAIT, "the next instance registers")
        assert not [line for line in second.lines() if waits(line)]
        assert holder_pid(plugin_dir) == second.pid


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_the_waiting_lock_names_the_holder_and_how_long_it_has_waited(plugin_dir: Path) -> None:
    holder, clock = InstanceLock(plugin_dir), Clock()
    waiter = InstanceLock(plugin_dir, clock=clock)
    await holder.acquire()
    await holder.acquire()  # again, as a restarted part of the holder's process would: no self-deadlock
    assert holder.status() == f"holding the lock on {plugin_dir}"
    async with anyio.create_task_group() as group:
        group.start_soon(waiter.acquire)
        await until(lambda: waiter.holder is not None, "the waiter reads the holder's note")
        clock.now += 12
        assert waiter.status().startswith(
            f"waiting for the lock held by pid {os.getpid()} (host {socket.gethostname()}, since "
        )
        assert waiter.status().endswith(") for 12 s")
        assert not waiter.held
        holder.release()
        await until(lambda: waiter.held, "the waiter takes the lock")
    assert holder_pid(plugin_dir) == os.getpid()
    waiter.release()
    assert not (plugin_dir / HOLDER_NOTE).exists()


@pytest.mark.anyio
async def test_a_directory_that_cannot_be_created_is_named_then_locked_once_it_can(short_tmp: Path) -> None:
    blocker = short_tmp / "kubelet"
    blocker.write_text("a file where the kubelet's directory should be")
    lock = InstanceLock(blocker / "device-plugins")
    async with anyio.create_task_group() as group:
        group.start_soon(lock.acquire)
        await until(lambda: bool(lock.problem), "the lock's problem")
        assert lock.status() == (
            f"cannot create {blocker / 'device-plugins'}: "
            f"{blocker} is a regular file where a directory belongs"
        )
        blocker.unlink()
        await until(lambda: lock.held, "the lock once the directory can be created")
    assert lock.problem == ""
    lock.release()


@pytest.mark.anyio
async def test_the_holder_note_comes_back_after_a_kubelet_deletes_it(plugin_dir: Path) -> None:
    lock = InstanceLock(plugin_dir)
    await lock.acquire()
    (plugin_dir / HOLDER_NOTE).unlink()  # what a kubelet that deletes every file does
    lock.keep_note()  # the app calls it after every registration
    assert holder_pid(plugin_dir) == os.getpid()
    lock.release()
