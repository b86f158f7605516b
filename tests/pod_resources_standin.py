"""The kubelet stand-in's PodResources API, on grpcio, for the tests of who holds which chip.

A real kubelet records, after each successful Allocate at pod admission, which
device IDs each container of the pod holds, and serves that on
``/var/lib/kubelet/pod-resources/kubelet.sock``. The stand-in does the same
for the pods a test admits through :meth:`PodResourcesStandIn.admit`: it calls
the plugin's Allocate through the :class:`~ascend_plugin.testing.kubelet_standin.KubeletStandIn`
and, only when Allocate succeeded, records the pod's devices. A pod is
forgotten on :meth:`PodResourcesStandIn.remove` (its containers ended). A DRA
claim's devices, which the kubelet lists once the DRA driver prepared the claim,
are recorded with :meth:`PodResourcesStandIn.claim` (v1 only, as the kubelet).

It serves ``v1.PodResourcesLister`` (``List``, ``GetAllocatableResources``:
every device the kubelet stand-in was told of, healthy or not, as the kubelet's
device manager reports them) and ``v1alpha1.PodResourcesLister`` (``List``);
``versions`` plays an older kubelet that serves only some of them (the others
answer UNIMPLEMENTED, as grpc does for an unknown method).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from ascend_plugin.kubelet_api import v1, v1alpha1
from ascend_plugin.kubelet_api.v1beta1 import AllocateResponse
from ascend_plugin.testing.grpc_unix import serve_unix, stop_unix
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

VERSIONS = ("v1", "v1alpha1")


@dataclass(frozen=True)
class AdmittedContainer:
    """A container the stand-in admitted: the device IDs it holds of one resource, or a claim's devices."""

    namespace: str
    name: str
    container: str
    resource: str = ""
    device_ids: tuple[str, ...] = ()
    claim: tuple[str, str, tuple[tuple[str, str, str], ...]] | None = None  # namespace, name, devices


class PodResourcesStandIn:
    """PodResources of the pods admitted through a kubelet stand-in, served on ``socket``."""

    def __init__(self, kubelet: KubeletStandIn, socket: Path, versions: Sequence[str] = VERSIONS) -> None:
        unknown = set(versions) - set(VERSIONS)
        if unknown:
            raise ValueError(f"unknown PodResources versions {sorted(unknown)}; known: {', '.join(VERSIONS)}")
        self.kubelet = kubelet
        self.socket = socket
        self.versions = tuple(versions)
        self.pods: dict[tuple[str, str], AdmittedContainer] = {}  # the first container of each pod
        self.containers: dict[tuple[str, str, str], AdmittedContainer] = {}
        self.calls: list[str] = []  # the methods asked, e.g. "/v1.PodResourcesLister/List"
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    def start(self) -> None:
        """Serve on ``socket``."""
        handlers = []
        if "v1" in self.versions:
            handlers.append(
                grpc.method_handlers_generic_handler(
                    "v1.PodResourcesLister",
                    {
                        "List": self._unary(
                            "/v1.PodResourcesLister/List", v1.ListPodResourcesRequest, self._v1
                        ),
                        "GetAllocatableResources": self._unary(
                            "/v1.PodResourcesLister/GetAllocatableResources",
                            v1.AllocatableResourcesRequest,
                            self._allocatable,
                        ),
                    },
                )
            )
        if "v1alpha1" in self.versions:
            handlers.append(
                grpc.method_handlers_generic_handler(
                    "v1alpha1.PodResourcesLister",
                    {
                        "List": self._unary(
                            "/v1alpha1.PodResourcesLister/List",
                            v1alpha1.ListPodResourcesRequest,
                            self._v1alpha1,
                        )
                    },
                )
            )
        self._server = serve_unix(self.socket, handlers, workers=4)

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        server, self._server = self._server, None
        stop_unix(server, self.socket)

    # -- what the kubelet does at pod admission and when a pod ends --------------------------

    def admit(
        self, namespace: str, name: str, resource: str, device_ids: Sequence[str], container: str = "main"
    ) -> AllocateResponse:
        """Allocate ``device_ids`` for the pod's container; record them once Allocate succeeded.

        Raises grpc.RpcError when the plugin refuses (the kubelet then fails the
        pod's admission and records nothing).
        """
        response = self.kubelet.allocate(resource, device_ids)
        self._record(AdmittedContainer(namespace, name, container, resource, tuple(device_ids)))
        return response

    def record(
        self, namespace: str, name: str, resource: str, device_ids: Sequence[str], container: str = "main"
    ) -> None:
        """A container listed as holding ``device_ids``, with no Allocate through this stand-in: admitted
        before the plugin (re)started, or served by a device plugin that is gone (a node moved to DRA)."""
        self._record(AdmittedContainer(namespace, name, container, resource, tuple(device_ids)))

    def claim(
        self,
        namespace: str,
        name: str,
        claim: str,
        devices: Sequence[tuple[str, str, str]],
        container: str = "main",
    ) -> None:
        """The container uses claim ``namespace/claim``, whose (driver, pool, device) the driver prepared."""
        self._record(AdmittedContainer(namespace, name, container, claim=(namespace, claim, tuple(devices))))

    def remove(self, namespace: str, name: str) -> None:
        """The pod's containers ended: the kubelet no longer lists its devices."""
        with self._lock:
            self.pods.pop((namespace, name), None)
            for key in [key for key in self.containers if key[:2] == (namespace, name)]:
                del self.containers[key]

    def _record(self, container: AdmittedContainer) -> None:
        with self._lock:
            self.pods.setdefault((container.namespace, container.name), container)
            self.containers[(container.namespace, container.name, container.container)] = container

    # -- the services -----------------------------------------------------------------------

    def _unary(self, method: str, request: type[Any], answer: Callable[[], Any]) -> grpc.RpcMethodHandler:
        def handle(message: Any, context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self.calls.append(method)
                return bytes(answer())

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=request.parse, response_serializer=bytes
        )

    def _v1(self) -> v1.ListPodResourcesResponse:
        listing: v1.ListPodResourcesResponse = self._listing(v1)
        for pod in listing.pod_resources:
            for container in pod.containers:
                admitted = self.containers[(pod.namespace, pod.name, container.name)]
                if admitted.claim is not None:
                    claim_namespace, claim_name, devices = admitted.claim
                    resources = [
                        v1.ClaimResource(driver_name=driver, pool_name=pool, device_name=device)
                        for driver, pool, device in devices
                    ]
                    container.dynamic_resources = [
                        v1.DynamicResource(
                            claim_name=claim_name, claim_namespace=claim_namespace, claim_resources=resources
                        )
                    ]
        return listing

    def _v1alpha1(self) -> v1alpha1.ListPodResourcesResponse:
        listing: v1alpha1.ListPodResourcesResponse = self._listing(v1alpha1)
        return listing

    def _listing(self, api: ModuleType) -> Any:
        """The List answer in one API version's messages (v1 and v1alpha1 share these shapes)."""
        pods: dict[tuple[str, str], list[AdmittedContainer]] = {}
        for container in self.containers.values():
            pods.setdefault((container.namespace, container.name), []).append(container)
        return api.ListPodResourcesResponse(
            pod_resources=[
                api.PodResources(
                    name=name,
                    namespace=namespace,
                    containers=[
                        api.ContainerResources(
                            name=container.container,
                            devices=[
                                api.ContainerDevices(
                                    resource_name=container.resource, device_ids=list(container.device_ids)
                                )
                            ]
                            if container.device_ids
                            else [],
                        )
                        for container in containers
                    ],
                )
                for (namespace, name), containers in pods.items()
            ]
        )

    def _allocatable(self) -> v1.AllocatableResourcesResponse:
        return v1.AllocatableResourcesResponse(
            devices=[
                v1.ContainerDevices(resource_name=name, device_ids=list(view.devices))
                for name, view in self.kubelet.resources.items()
            ]
        )
