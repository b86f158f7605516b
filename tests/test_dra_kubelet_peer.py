"""Both DRA sockets answer only the kubelet: a process of another uid is refused before its request is read.

The kubelet's uid is the owner of its plugin registry directory. A client
running as ``nobody`` (a child process with another uid: the kernel records it
at connect, ``SO_PEERCRED``) gets PERMISSION_DENIED from GetInfo,
NotifyRegistrationStatus and the DRA calls; a spoofed "registration refused"
changes nothing, and a spoofed Unprepare removes no claim's CDI spec.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from dra_harness import DRIVER, DraNode, prepare, put_claim, result
from log_records import records

from ascend_plugin.app import PluginApp
from ascend_plugin.grpc_guard.peers import OwnerOf, Peer
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1
from ascend_plugin.kubelet_api.pluginregistration import InfoRequest, PluginInfo, RegistrationStatus
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.kube_apiserver import FakeApiServer

pytestmark = pytest.mark.anyio
# The tests that start a client of another uid; the rule's own test runs as anyone.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a client of another uid needs root to start it")

NOBODY = 65534
GET_INFO = "/pluginregistration.Registration/GetInfo"
NOTIFY = "/pluginregistration.Registration/NotifyRegistrationStatus"
UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"

# One unary call with grpcio as another uid, printed as JSON: the status code and details, or the
# answer's bytes. The channel is made (and grpc's modules loaded: the interpreter may live where only
# root reads) before the uid changes; it connects at the call, so the kernel records the new uid.
_CLIENT = """
import json, os, sys, grpc
uid, socket, method, payload = int(sys.argv[1]), sys.argv[2], sys.argv[3], bytes.fromhex(sys.argv[4])
channel = grpc.insecure_channel("unix:" + socket)
call = channel.unary_unary(method)
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
try:
    print(json.dumps({"code": "OK", "answer": call(payload, timeout=10).hex()}))
except grpc.RpcError as error:
    print(json.dumps({"code": error.code().name, "details": error.details()}))
channel.close()
"""


def call_as(uid: int, socket: Path, method: str, payload: bytes) -> dict[str, Any]:
    """One raw call on ``socket`` from a process running as ``uid``."""
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(uid), str(socket), method, payload.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.fixture
def careless_umask() -> Iterator[None]:
    """Sockets created while it holds are connectable by any uid (as under a careless deployment).

    Requested before the driver, so its sockets are made under it; the socket files cannot be
    chmod-ed afterwards, since the driver serves a socket whose file changed on a fresh one.
    """
    previous = os.umask(0)
    yield
    os.umask(previous)


def reachable_by_anyone(node: DraNode) -> None:
    """Open the directories on the way to the sockets for any uid."""
    for directory in (node.root.parent, node.root, node.root / "plugins", node.plugin_dir, node.registry_dir):
        directory.chmod(0o755)


@pytest.fixture
def registration_socket(dra_node: DraNode) -> Path:
    return dra_node.registry_dir / f"{DRIVER}-reg.sock"


@needs_root
async def test_registration_calls_from_another_uid_are_refused_and_change_nothing(
    careless_umask: None,
    dra_driver: PluginApp,
    dra_node: DraNode,
    registration_socket: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert dra_driver.dra is not None
    reachable_by_anyone(dra_node)
    spoofed = bytes(RegistrationStatus(plugin_registered=False, error="spoofed refusal"))
    for method, payload in ((GET_INFO, bytes(InfoRequest())), (NOTIFY, spoofed)):
        answer = await anyio.to_thread.run_sync(call_as, NOBODY, registration_socket, method, payload)
        assert answer["code"] == "PERMISSION_DENIED", answer
        assert answer["details"].startswith(
            f"this socket answers only the kubelet, uid 0 (the owner of {dra_node.registry_dir}); pid "
        )
        assert answer["details"].endswith(f"(uid {NOBODY}) is not the kubelet")
    assert dra_driver.dra.registration.registered
    assert dra_driver.dra.registration.last_error == ""
    assert not records(caplog, "ascend_plugin.faces.dra.registration", level=logging.ERROR), (
        "the spoof acted on"
    )
    refused = records(caplog, "ascend_plugin.grpc_guard.refusal_log")
    assert refused[0].__dict__["status"] == "PERMISSION_DENIED"
    assert f"(uid {NOBODY})" in refused[0].__dict__["peer"]


@needs_root
async def test_the_kubelet_s_uid_is_the_owner_of_its_registry_directory(
    careless_umask: None, dra_driver: PluginApp, dra_node: DraNode, registration_socket: Path
) -> None:
    reachable_by_anyone(dra_node)
    os.chown(dra_node.registry_dir, NOBODY, NOBODY)
    try:
        answer = await anyio.to_thread.run_sync(
            call_as, NOBODY, registration_socket, GET_INFO, bytes(InfoRequest())
        )
    finally:
        os.chown(dra_node.registry_dir, 0, 0)
    assert answer["code"] == "OK", answer
    assert PluginInfo.parse(bytes.fromhex(answer["answer"])).name == DRIVER
    root = await anyio.to_thread.run_sync(call_as, 0, registration_socket, GET_INFO, bytes(InfoRequest()))
    assert root["code"] == "OK", root


@needs_root
async def test_a_dra_call_from_another_uid_is_refused_and_the_claim_stays_prepared(
    careless_umask: None,
    dra_driver: PluginApp,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    dra_kubelet: DraKubeletStandIn,
) -> None:
    namespace, name, uid = put_claim(apiserver, "train", [result("npu-0")])
    prepared = await prepare(dra_kubelet, (namespace, name, uid))
    assert prepared.claims[uid].devices
    specs = dra_node.spec_files()
    assert specs
    dra_socket = dra_node.plugin_dir / "dra.sock"
    reachable_by_anyone(dra_node)
    unprepare = bytes(
        v1.NodeUnprepareResourcesRequest(claims=[v1.Claim(namespace=namespace, uid=uid, name=name)])
    )
    answer = await anyio.to_thread.run_sync(call_as, NOBODY, dra_socket, UNPREPARE, unprepare)
    assert answer["code"] == "PERMISSION_DENIED", answer
    assert dra_node.spec_files() == specs


def test_a_registry_directory_that_cannot_be_read_stands_for_root(short_tmp: Path) -> None:
    rule = OwnerOf(short_tmp / "absent", "the kubelet")
    assert rule(Peer(pid=7, uid=0, gid=0)) == ""
    assert rule(Peer(pid=7, uid=1000, gid=1000)) == (
        f"this socket answers only the kubelet, uid 0 (root: the owner of {short_tmp / 'absent'} cannot be "
        "read (No such file or directory)); pid 7 (uid 1000) is not the kubelet"
    )
    assert rule(Peer()).endswith("; a peer whose credentials are unknown is not the kubelet")
