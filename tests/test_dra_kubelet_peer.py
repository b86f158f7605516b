"""Both DRA sockets answer only the kubelet: a process of another uid is refused before its request is read.

The kubelet's uid is the owner of its plugin registry directory. A client
running as ``nobody`` (a child process with another uid: the kernel records it
at connect, ``SO_PEERCRED``) gets PERMISSION_DENIED from GetInfo,
NotifyRegistrationStatus and the DRA calls; a spoofed "registration refused"
changes nothing, and a spoofed Unprepare removes no claim's CDI spec.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio.to_thread
import pytest
from dra_harness import DRIVER, DraNode, prepare, put_claim, result
from fake_apiserver import FakeApiServer
from log_records import records
from peer_client import call_as

from ascend_plugin.app import PluginApp
from ascend_plugin.grpc_guard.peers import OwnerOf, Peer
from ascend_plugin.kubelet_api.k8s.io.kubelet.pkg.apis.dra import v1
from ascend_plugin.kubelet_api.pluginregistration import InfoRequest, PluginInfo, RegistrationStatus
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio
# The tests that start a client of another uid; the rule's own test runs as anyone.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a client of another uid needs root to start it")

NOBODY = 65534
GET_INFO = "/pluginregistration.Registration/GetInfo"
NOTIFY = "/pluginregistration.Registration/NotifyRegistrationStatus"
UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"


@pytest.fixture
def careless_umask() -> Iterator[None]:
    """The driver starts under umask 000, as under a careless deployment: its modes do not follow it.

    Requested before the driver, so its sockets are made under it. The clients below may open any
    file (root in another container may): the socket's mode does not stop them, its peer check does.
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
        answer = await anyio.to_thread.run_sync(
            partial(call_as, NOBODY, registration_socket, method, payload, open_any_file=True)
        )
        assert answer["code"] == "PERMISSION_DENIED", answer
        assert answer["details"].startswith(
            f"this socket answers only the kubelet, uid 0 (the owner of {dra_node.registry_dir}); pid "
        )
        assert answer["details"].endswith(f"(uid {NOBODY}) is not the kubelet")
    assert dra_driver.dra.registration.registered
    assert dra_driver.dra.registration.last_error == ""
    assert not records(caplog, "ascend_plugin.faces.dra.services", level=logging.ERROR), "the spoof acted on"
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
            partial(call_as, NOBODY, registration_socket, GET_INFO, bytes(InfoRequest()), open_any_file=True)
        )
    finally:
        os.chown(dra_node.registry_dir, 0, 0)
    assert answer["code"] == "OK", answer
    assert PluginInfo.parse(bytes.fromhex(answer["answer"])).name == DRIVER
    root = await anyio.to_thread.run_sync(
        partial(call_as, 0, registration_socket, GET_INFO, bytes(InfoRequest()), open_any_file=False)
    )
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
    answer = await anyio.to_thread.run_sync(
        partial(call_as, NOBODY, dra_socket, UNPREPARE, unprepare, open_any_file=True)
    )
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
