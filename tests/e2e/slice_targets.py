"""Where the ResourceSlice scenarios are sent: the real API server, or the project's loopback stand-in.

Both are reached with the suite's own client (api.py), so both receive the same requests. A scenario
asks for the three DRA feature gates a node driver relies on at the release's defaults, all on, or
all off. On the real cluster the gates the release does not default to are a second kube-apiserver
on the same etcd, started when first needed (as during an upgrade, two servers of two settings share
one store); on the stand-in they are switched on its one server before each request.
"""

from __future__ import annotations

import contextlib
import enum
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from api import Api, Obj
from cluster import Cluster, Component, _feature_gates, _http_ok
from fake_apiserver import FakeApiServer
from local_port import free_port

from bench.common import ApiServerThread

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
Release = tuple[int, int]

# The gates that keep the fields of partitions, shared devices and device taints.
DRA_GATES = ("DRAPartitionableDevices", "DRAConsumableCapacity", "DRADeviceTaints")
# Gates the API server refuses to start with when one of DRA_GATES is off.
NEEDING = {"DRADeviceTaints": ("DRADeviceTaintRules",)}
DEFAULT_ON_FROM: Release = (1, 36)  # the release whose defaults turn DRA_GATES on (beta)


class Gates(enum.Enum):
    """The DRA gates a request is answered with."""

    DEFAULT = "at the release's defaults"
    ON = "on"
    OFF = "off"

    def on(self, release: Release) -> bool:
        return release >= DEFAULT_ON_FROM if self is Gates.DEFAULT else self is Gates.ON


def release_of(version: str) -> Release:
    major, minor = (int(part) for part in version.split(".")[:2])
    return major, minor


def flipped_gates(release: Release) -> dict[str, bool]:
    """DRA_GATES the other way than the release's defaults (and what needs them, off with them)."""
    on = not Gates.DEFAULT.on(release)
    gates = dict.fromkeys(DRA_GATES, on)
    if not on:
        gates |= {needing: False for gate in DRA_GATES for needing in NEEDING.get(gate, ())}
    return gates


class Target:
    """An API server to send scenarios to."""

    release: Release

    def api(self, gates: Gates = Gates.DEFAULT) -> Api:
        raise NotImplementedError

    def without_permission(self) -> contextlib.AbstractContextManager[Api]:
        """A client whose user may not create ResourceSlices."""
        raise NotImplementedError

    def node_owner(self, node: str) -> Obj:
        """An owner reference to the Node ``node`` (made if missing), as the plugin sets it."""
        raise NotImplementedError


class RealServer(Target):
    """The control plane's API server, and on demand a second one with the DRA gates flipped."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.release = release_of(cluster.binaries.kubernetes_version)
        self._admin = cluster.admin()
        self._flipped: Api | None = None
        self._second: Component | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the second API server, if one was started (the cluster stops only its own)."""
        if self._second is not None:
            self._second.stop()

    def api(self, gates: Gates = Gates.DEFAULT) -> Api:
        if gates is Gates.DEFAULT or gates.on(self.release) == Gates.DEFAULT.on(self.release):
            return self._admin
        with self._lock:
            if self._flipped is None:
                self._flipped = self._start_flipped()
        return self._flipped

    def _start_flipped(self) -> Api:
        """A second kube-apiserver of the same etcd, the DRA gates flipped (stopped by :meth:`close`)."""
        first = self.cluster.components["kube-apiserver"]
        port = free_port()
        gates = {**self.cluster.feature_gates, **flipped_gates(self.release)}
        command = [arg for arg in first.command if not arg.startswith(("--secure-port=", "--feature-gates="))]
        command += [f"--secure-port={port}", "--endpoint-reconciler-type=none", *_feature_gates(gates)]
        second = Component(
            "kube-apiserver-flipped", command, first.log.with_name("kube-apiserver-flipped.log")
        )
        self._second = second
        second.start()
        server = f"https://127.0.0.1:{port}"
        assert self.cluster.pki is not None
        ca = self.cluster.pki.ca
        second.wait_ready(lambda: _http_ok(f"{server}/readyz", self._admin.token, ca))
        return Api(server, ca, self._admin.token)

    @contextlib.contextmanager
    def without_permission(self) -> Iterator[Api]:
        """A new ServiceAccount of ``default`` with no role, through a token the server issues."""
        account = f"no-role-{secrets.token_hex(3)}"
        self._admin.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}, "default"
        )
        issued = self._admin.request(
            "POST",
            f"/api/v1/namespaces/default/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        yield self._admin.as_user(issued["status"]["token"])

    def node_owner(self, node: str) -> Obj:
        found = self._admin.read("v1", "Node", node)
        if found is None:
            found = self._admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        return _owner(found)


class _Switching(Api):
    """The stand-in's client: sets the stand-in's gates before each request."""

    def __init__(self, server: str, ca: Path, token: str, stand_in: StandIn, gates: Gates) -> None:
        super().__init__(server, ca, token)
        self.stand_in, self.gates = stand_in, gates

    def request(self, method: str, path: str, body: object = None, **options: Any) -> Any:
        self.stand_in.set_gates(self.gates)
        return super().request(method, path, body, **options)

    def watch(self, path: str, seconds: int, **query: str) -> list[Obj]:
        self.stand_in.set_gates(self.gates)
        return super().watch(path, seconds, **query)


class StandIn(Target):
    """The loopback stand-in (FakeApiServer) playing ``version``, on a thread of its own.

    ``ca``: any CA file; the client's TLS settings go unused over the stand-in's plain HTTP.
    """

    def __init__(self, version: str, ca: Path) -> None:
        self.release = release_of(version)
        self.thread = ApiServerThread(".".join(map(str, self.release)))
        self.fake: FakeApiServer = self.thread.server
        self._clients = {
            gates: _Switching(self.fake.url, ca, self.fake.token, self, gates) for gates in Gates
        }

    def close(self) -> None:
        self.thread.stop()

    def set_gates(self, gates: Gates) -> None:
        wanted = {} if gates is Gates.DEFAULT else dict.fromkeys(DRA_GATES, gates is Gates.ON)
        self.thread.call(lambda: setattr(self.fake, "gates", wanted))

    def api(self, gates: Gates = Gates.DEFAULT) -> Api:
        return self._clients[gates]

    @contextlib.contextmanager
    def without_permission(self) -> Iterator[Api]:
        denial = self.thread.call(lambda: self.fake.deny("create", "resourceslices"))
        try:
            yield self.api()
        finally:
            self.thread.call(lambda: self.fake.denials.remove(denial))

    def node_owner(self, node: str) -> Obj:
        found = self.thread.call(lambda: self.fake.get("nodes", node) or self.fake.add_node(node))
        return _owner(found)


def _owner(node: Obj) -> Obj:
    metadata = node["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
    }
