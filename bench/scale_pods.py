"""Pods with claims for bench/cluster_scale.py: made at a steady rate, timed to their binding, deleted.

A pod asks for one ResourceClaimTemplate (a whole chip, two chips of one topology unit, or one
partition); the controller manager makes its claim, the scheduler allocates it and binds the pod,
and nothing runs it. A streaming watch of the namespace times each pod from its creation (the
create call's answer) to the first event that shows it bound; a pod is then deleted at once
(``gracePeriodSeconds=0``: no kubelet would confirm a graceful delete), which frees its claim. The
scheduler's own view (its metrics) and the processes' CPU are read around each phase.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pods import pod

NAMESPACE = "default"
WORKERS = 8  # threads that create and delete pods, so a slow call does not hold up the rate
DRIVER = "npu.huawei.com"


@dataclass(frozen=True)
class Ask:
    """What one kind of pod asks for: a claim template, and whether it is a partition."""

    template: str
    device_class: str
    count: int = 1
    same_unit: bool = False  # its devices on one topology unit (matchAttribute)
    partition: bool = False

    def claim_template(self) -> dict[str, Any]:
        request: dict[str, Any] = {"name": "npu", "exactly": {"deviceClassName": self.device_class}}
        if self.count > 1:
            request["exactly"]["count"] = self.count
        devices: dict[str, Any] = {"requests": [request]}
        if self.same_unit:
            devices["constraints"] = [{"requests": ["npu"], "matchAttribute": f"{DRIVER}/topologyUnit"}]
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": self.template, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": devices}},
        }


def pick(mix: Sequence[tuple[Ask, int]], count: int, seed: int) -> list[Ask]:
    """``count`` asks drawn from ``mix`` (ask, weight), the same for the same seed."""
    chooser = random.Random(seed)
    asks, weights = zip(*mix, strict=True)
    return chooser.choices(list(asks), weights=list(weights), k=count)


class Connections:
    """HTTPS connections to the API server that stay open, one per thread, as a real client's do.

    A new TLS connection per call would cost the API server a handshake per pod, which no
    controller or kubectl pays, and would be measured as its CPU.
    """

    def __init__(self, server: str, ca: Path, token: str) -> None:
        address = urllib.parse.urlsplit(server)
        self.host, self.port = address.hostname or "127.0.0.1", address.port or 443
        self.tls = ssl.create_default_context(cafile=str(ca))
        self.token = token
        self._local = threading.local()

    def open(self, timeout: float = 60.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls, timeout=timeout)

    def request(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """(status, decoded answer); one retry on a connection the server closed."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            connection = getattr(self._local, "connection", None) or self.open()
            self._local.connection = connection
            try:
                connection.request(method, path, data, headers)
                answer = connection.getresponse()
                text = answer.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
                continue
            return answer.status, json.loads(text) if text else None
        raise AssertionError("unreachable")


class PodWatch:
    """A streaming watch of the namespace's pods: when each was first seen bound, and which are gone."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.bound: dict[str, float] = {}
        self.gone: set[str] = set()
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._listeners: list[Callable[[str], None]] = []
        self._connection: http.client.HTTPSConnection | None = None

    def start(self) -> None:
        status, listed = self.connections.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
        assert status == 200, listed
        self.version: str = listed["metadata"]["resourceVersion"]
        self._thread.start()

    def on_bound(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def stop(self) -> None:
        self._stop.set()
        if self._connection is not None and self._connection.sock is not None:
            with contextlib.suppress(OSError):
                self._connection.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                self._watch()

    def _watch(self) -> None:
        query = urllib.parse.urlencode(
            {"watch": "1", "resourceVersion": self.version, "allowWatchBookmarks": "true"}
        )
        self._connection = self.connections.open(timeout=3600)
        self._connection.request(
            "GET",
            f"/api/v1/namespaces/{NAMESPACE}/pods?{query}",
            headers={"Authorization": f"Bearer {self.connections.token}"},
        )
        for line in self._connection.getresponse():
            if self._stop.is_set():
                return
            self._event(json.loads(line), time.monotonic())

    def _event(self, event: Mapping[str, Any], seen: float) -> None:
        obj = event["object"]
        if event["type"] == "ERROR":  # the version is too old: watch again from a list of what exists
            self.version = ""
            return
        self.version = obj["metadata"].get("resourceVersion", self.version)
        if event["type"] == "BOOKMARK":
            return
        name, fresh = obj["metadata"]["name"], False
        with self.changed:
            if event["type"] == "DELETED":
                self.gone.add(name)
            elif obj["spec"].get("nodeName") and name not in self.bound:
                self.bound[name], fresh = seen, True
            self.changed.notify_all()
        if fresh:
            for listener in self._listeners:
                listener(name)

    def wait(self, condition: Callable[[], bool], within: float, what: str) -> None:
        deadline = time.monotonic() + within
        with self.changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"not within {within:g} s: {what}")
                self.changed.wait(min(left, 1.0))


@dataclass
class Phase:
    """One batch of pods: when each was created and bound, which ask it was, which failed to be made."""

    name: str
    created: dict[str, float] = field(default_factory=dict)
    asks: dict[str, Ask] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    started: float = 0.0
    offered_seconds: float = 0.0  # how long the creation took

    def latencies(self, watch: PodWatch, only: Callable[[Ask], bool] = lambda ask: True) -> list[float]:
        return [
            max(0.0, watch.bound[name] - made)
            for name, made in self.created.items()
            if name in watch.bound and only(self.asks[name])
        ]

    def throughput(self, watch: PodWatch) -> float:
        """Pods bound per second, from the first creation to the last binding."""
        ends = [watch.bound[name] for name in self.created if name in watch.bound]
        if not ends:
            return 0.0
        return len(ends) / max(1e-6, max(ends) - self.started)


class PodMaker:
    """Creates pods at a rate and deletes them once bound (unless kept), each on its own threads."""

    def __init__(self, connections: Connections, watch: PodWatch) -> None:
        self.connections = connections
        self.watch = watch
        self.creating = ThreadPoolExecutor(WORKERS, thread_name_prefix="create")
        self.deleting = ThreadPoolExecutor(WORKERS, thread_name_prefix="delete")
        self.keep: set[str] = set()
        self.errors: list[str] = []
        watch.on_bound(self._bound)

    def _bound(self, name: str) -> None:
        if name not in self.keep:
            self.deleting.submit(self.delete, name)

    def delete(self, name: str) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}?gracePeriodSeconds=0"
        status, answer = self.connections.request("DELETE", path)
        if status not in (200, 202, 404):
            self.errors.append(f"delete {name}: {status} {answer}")

    def _create(self, phase: Phase, name: str, ask: Ask) -> None:
        body = pod(name, claim_templates={"npu": ask.template})
        body["metadata"]["labels"] = {"bench": "cluster-scale"}
        status, answer = self.connections.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        if status != 201:
            phase.refused.append(f"{name}: {status} {answer}")
            return
        phase.created[name] = time.monotonic()

    def run(self, phase: Phase, asks: Sequence[Ask], rate: float | None, keep: bool = False) -> None:
        """Create one pod per ask, ``rate`` a second (None: as fast as the threads go)."""
        names = [f"{phase.name}-{index:05d}" for index in range(len(asks))]
        phase.asks.update(zip(names, asks, strict=True))
        if keep:
            self.keep.update(names)
        phase.started = time.monotonic()
        futures = []
        for index, (name, ask) in enumerate(zip(names, asks, strict=True)):
            if rate:
                delay = phase.started + index / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            futures.append(self.creating.submit(self._create, phase, name, ask))
        for future in futures:
            future.result()
        phase.offered_seconds = time.monotonic() - phase.started

    def wait_bound(self, phase: Phase, within: float) -> None:
        self.watch.wait(
            lambda: all(name in self.watch.bound for name in phase.created),
            within,
            f"{len(phase.created)} pods of {phase.name} bound",
        )

    def release(self, phase: Phase, within: float) -> None:
        """Delete the kept pods of ``phase`` and wait until every pod of it is gone."""
        for name in phase.created:
            if name in self.keep:
                self.keep.discard(name)
                self.deleting.submit(self.delete, name)
        self.watch.wait(
            lambda: all(name in self.watch.gone for name in phase.created),
            within,
            f"the pods of {phase.name} gone",
        )

    def close(self) -> None:
        self.creating.shutdown(wait=True)
        self.deleting.shutdown(wait=True)


def claims_left(connections: Connections) -> int:
    status, listed = connections.request(
        "GET", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    )
    assert status == 200, listed
    return len(listed["items"])


# -- Prometheus text: histograms ------------------------------------------------------------------


def histogram(text: str, name: str, labels: Mapping[str, str] | None = None) -> dict[float, float]:
    """The cumulative buckets (upper bound -> count) of ``name``, summed over series matching ``labels``."""
    buckets: dict[float, float] = {}
    prefix = f"{name}_bucket{{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        body, value = line[len(prefix) :].rsplit("} ", 1)
        found = dict(_label_pairs(body))
        if any(found.get(key) != wanted for key, wanted in (labels or {}).items()):
            continue
        bound = float("inf") if found["le"] == "+Inf" else float(found["le"])
        buckets[bound] = buckets.get(bound, 0.0) + float(value)
    return buckets


def _label_pairs(body: str) -> list[tuple[str, str]]:
    pairs = []
    for part in body.split('",'):
        if "=" in part:
            key, value = part.split("=", 1)
            pairs.append((key.strip(), value.strip().strip('"')))
    return pairs


def delta(after: Mapping[float, float], before: Mapping[float, float]) -> dict[float, float]:
    return {bound: count - before.get(bound, 0.0) for bound, count in after.items()}


def quantile(buckets: Mapping[float, float], fraction: float) -> float | None:
    """Prometheus's histogram_quantile: linear within the bucket the rank falls in."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = fraction * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * ((rank - below) / max(count - below, 1e-12))
        lower, below = bound, count
    return lower
