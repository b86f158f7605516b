"""The few API calls the plugin makes, on kubernetes-asyncio, with JSON in and out.

kubernetes-asyncio is largely untyped and turns every object into a generated model
class; the plugin needs a handful of fields from a few kinds of object. So each
call asks the client for the raw response (``_preload_content=False``), checks
the status itself and hands back plain JSON objects, and every failure leaves
here as one of the exceptions in :mod:`ascend_plugin.kubeapi.errors`. The ``Any``
of the untyped client stays inside this module.

Every request carries a timeout: an API server that accepts connections but
never answers must not hang a part forever.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api, ResourceV1Api
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config

from ascend_plugin.kubeapi.errors import ApiError, KubeConfigError, Unreachable, api_error

log = logging.getLogger(__name__)

JsonObject = dict[str, object]

REQUEST_TIMEOUT = 10.0  # seconds for one ordinary request, connect to last byte
# A watch ends on the server's side after this many seconds and is then renewed;
# reading may take a little longer before a silent connection counts as dead.
WATCH_TIMEOUT = 180
WATCH_READ_SLACK = 30.0


Call = Callable[..., Any]  # an untyped client method, called with the API object first
EVERYWHERE = "list everywhere"  # the key of a namespaced kind's call that lists (and watches) all namespaces


@dataclass(frozen=True)
class Resource:
    """A kind of object: its plural (as RBAC names it), its API group, and the calls the plugin makes on it.

    ``calls`` maps a verb as RBAC names it (``get``, ``list``, ``create``,
    ``update``, ``patch``, ``delete``; a watch is a list with ``watch=True``, and
    :data:`EVERYWHERE` lists a namespaced kind across namespaces) to the API
    class's own function, e.g. ``CoreV1Api.read_namespaced_config_map``, called
    with the API object as its first argument: every call the plugin makes can
    be found by its name, and only those are here.
    """

    plural: str
    namespaced: bool
    calls: Mapping[str, Call] = field(compare=False)
    group: str = ""  # "" is the core group (/api/v1)

    @property
    def api(self) -> type:
        """The client's API class of the kind's group."""
        return _API_CLASSES[self.group]

    @property
    def qualified(self) -> str:
        """``<group>/<plural>`` (just the plural in the core group), as errors name it."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    def call(self, verb: str, namespace: str | None = None) -> Call:
        """The client call for ``verb`` in ``namespace`` (None: every namespace, for a list or a watch)."""
        if verb == "watch":
            verb = "list"
        if verb == "list" and self.namespaced and namespace is None:
            verb = EVERYWHERE
        try:
            return self.calls[verb]
        except KeyError:
            raise LookupError(
                f"the plugin makes no {verb!r} call on {self.qualified}; "
                "name the client's method in its calls (ascend_plugin/kubeapi/client.py)"
            ) from None


NODES = Resource(
    "nodes",
    namespaced=False,
    calls={"get": CoreV1Api.read_node, "list": CoreV1Api.list_node, "patch": CoreV1Api.patch_node},
)
CONFIGMAPS = Resource(
    "configmaps",
    namespaced=True,
    calls={
        "get": CoreV1Api.read_namespaced_config_map,
        "list": CoreV1Api.list_namespaced_config_map,
        "create": CoreV1Api.create_namespaced_config_map,
        "update": CoreV1Api.replace_namespaced_config_map,
    },
)
EVENTS = Resource("events", namespaced=True, calls={"create": CoreV1Api.create_namespaced_event})
PODS = Resource(
    "pods",
    namespaced=True,
    calls={
        "get": CoreV1Api.read_namespaced_pod,
        EVERYWHERE: CoreV1Api.list_pod_for_all_namespaces,
        "patch": CoreV1Api.patch_namespaced_pod,
    },
)
# Dynamic Resource Allocation, resource.k8s.io/v1 (Kubernetes 1.34 and later).
DRA_GROUP = "resource.k8s.io"
RESOURCE_SLICES = Resource(
    "resourceslices",
    namespaced=False,
    group=DRA_GROUP,
    calls={
        "get": ResourceV1Api.read_resource_slice,
        "list": ResourceV1Api.list_resource_slice,
        "create": ResourceV1Api.create_resource_slice,
        "update": ResourceV1Api.replace_resource_slice,
        "delete": ResourceV1Api.delete_resource_slice,
    },
)
RESOURCE_CLAIMS = Resource(
    "resourceclaims",
    namespaced=True,
    group=DRA_GROUP,
    calls={"get": ResourceV1Api.read_namespaced_resource_claim},
)

_API_CLASSES: Mapping[str, type] = {"": CoreV1Api, DRA_GROUP: ResourceV1Api}

_CLIENT_FAILURES = (aiohttp.ClientError, OSError, TimeoutError)


@dataclass(frozen=True)
class Listing:
    """The items of a list call and the resourceVersion to watch from."""

    items: list[JsonObject]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream: ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: JsonObject

    @property
    def resource_version(self) -> str:
        """The resourceVersion to resume the watch from after this event."""
        return string_field(mapping_field(self.object, "metadata"), "resourceVersion")


def mapping_field(obj: Mapping[str, object], key: str) -> JsonObject:
    """``obj[key]`` if it is a JSON object, else an empty one."""
    value = obj.get(key)
    return dict(value) if isinstance(value, dict) else {}


def string_field(obj: Mapping[str, object], key: str) -> str:
    """``obj[key]`` if it is a string, else ``""``."""
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def string_map(obj: Mapping[str, object], key: str) -> dict[str, str]:
    """``obj[key]`` as a str -> str mapping (labels, ConfigMap data); other entries are dropped."""
    return {k: v for k, v in mapping_field(obj, key).items() if isinstance(v, str)}


def labels_of(obj: Mapping[str, object]) -> dict[str, str]:
    """An object's labels."""
    return string_map(mapping_field(obj, "metadata"), "labels")


def _json_object(raw: bytes) -> JsonObject | None:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _status_message(raw: bytes) -> str:
    """The message of a Status body, or the start of whatever came back."""
    body = _json_object(raw)
    if body is not None and isinstance(body.get("message"), str):
        return str(body["message"])
    return raw[:300].decode("utf-8", "replace").strip() or "(no message)"


@dataclass(frozen=True)
class _Request:
    """What one request is about: the client call it makes (a verb as RBAC names it), and its target."""

    verb: str
    resource: Resource
    call: Call
    namespace: str | None = None
    name: str = ""

    @property
    def target(self) -> str:
        if self.namespace and self.name:
            return f"{self.namespace}/{self.name}"
        return self.name or (f"in namespace {self.namespace}" if self.namespace else "")

    def error(self, status: int, message: str) -> ApiError:
        """The exception for an error status of this request."""
        return api_error(status, self.verb, self.resource.qualified, self.target, message)


class Kube:
    """Typed JSON calls to one API server."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client  # for the few calls without a typed wrapper here (doctor's RBAC review)
        self._apis: dict[type, Any] = {api: api(api_client) for api in (CoreV1Api, ResourceV1Api)}
        self.host: str = api_client.configuration.host

    async def close(self) -> None:
        """Close the client's connection pool."""
        await self.api_client.close()

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonObject:
        """Read one object."""
        return await self._call(_Request("get", resource, resource.call("get"), namespace, name))

    async def list(self, resource: Resource, namespace: str | None, field_selector: str) -> Listing:
        """List the objects matching ``field_selector``."""
        request = _Request("list", resource, resource.call("list", namespace), namespace)
        body = await self._call(request, field_selector=field_selector)
        raw_items = body.get("items")
        items = [item for item in raw_items if isinstance(item, dict)] if isinstance(raw_items, list) else []
        version = string_field(mapping_field(body, "metadata"), "resourceVersion")
        return Listing(items, version)

    async def create(self, resource: Resource, namespace: str, body: JsonObject) -> JsonObject:
        """Create an object."""
        return await self._call(_Request("create", resource, resource.call("create"), namespace), body)

    async def replace(self, resource: Resource, name: str, namespace: str, body: JsonObject) -> JsonObject:
        """Replace an object; a stale ``metadata.resourceVersion`` in ``body`` raises Conflict."""
        return await self._call(_Request("update", resource, resource.call("update"), namespace, name), body)

    async def patch(
        self, resource: Resource, name: str, namespace: str | None, body: JsonObject
    ) -> JsonObject:
        """Strategic-merge-patch an object (the client's default content type for a dict body)."""
        return await self._call(_Request("patch", resource, resource.call("patch"), namespace, name), body)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        preconditions: JsonObject | None = None,
    ) -> JsonObject:
        """Delete an object; ``preconditions`` (uid, resourceVersion) make a changed object a Conflict."""
        options: JsonObject = {"preconditions": preconditions} if preconditions else {}
        request = _Request("delete", resource, resource.call("delete"), namespace, name)
        return await self._call(request, body=None, body_option=options)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        field_selector: str,
        resource_version: str,
        timeout_seconds: int = WATCH_TIMEOUT,
    ) -> AsyncGenerator[WatchEvent, None]:
        """The events after ``resource_version`` until the server ends the stream.

        An ERROR event raises its status as an exception (410 Gone when the
        version is too old: list again).
        """
        request = _Request("watch", resource, resource.call("watch", namespace), namespace)
        query = {
            "field_selector": field_selector,
            "watch": True,
            "allow_watch_bookmarks": True,
            "resource_version": resource_version,
            "timeout_seconds": timeout_seconds,
        }
        read_timeout = timeout_seconds + WATCH_READ_SLACK
        response = await self._send(
            request,
            None,
            query,
            deadline=aiohttp.ClientTimeout(sock_connect=REQUEST_TIMEOUT, sock_read=read_timeout),
        )
        try:
            if not 200 <= response.status < 300:
                raise request.error(response.status, _status_message(await response.read()))
            async for line in response.content:
                event = _json_object(line)
                if event is None:
                    continue
                kind = string_field(event, "type")
                obj = mapping_field(event, "object")
                if kind == "ERROR":
                    code = obj.get("code")
                    status = code if isinstance(code, int) else 500
                    raise request.error(status, string_field(obj, "message") or "watch error")
                yield WatchEvent(kind, obj)
        except _CLIENT_FAILURES as error:
            raise self._unreachable(request, error) from error
        finally:
            response.close()

    async def _call(
        self,
        request: _Request,
        body: JsonObject | None = None,
        body_option: JsonObject | None = None,
        **query: object,
    ) -> JsonObject:
        if body_option is not None:
            query = {**query, "body": body_option}  # the client's delete methods take their body by keyword
        response = await self._send(request, body, query, deadline=REQUEST_TIMEOUT)
        try:
            raw = await response.read()
        except _CLIENT_FAILURES as error:
            raise self._unreachable(request, error) from error
        finally:
            response.release()
        if not 200 <= response.status < 300:
            raise request.error(response.status, _status_message(raw))
        parsed = _json_object(raw)
        if parsed is None:
            raise request.error(response.status, "the response is not a JSON object")
        return parsed

    async def _send(
        self,
        request: _Request,
        body: JsonObject | None,
        query: Mapping[str, object],
        *,
        deadline: float | aiohttp.ClientTimeout,
    ) -> Any:
        """Start one request; the aiohttp response (status not checked yet)."""
        args: list[object] = [self._apis[request.resource.api]]
        if request.name:
            args.append(request.name)
        if request.resource.namespaced and request.namespace is not None:
            args.append(request.namespace)
        if body is not None:
            args.append(body)
        try:
            return await request.call(*args, _preload_content=False, _request_timeout=deadline, **query)
        except ConfigException as error:  # the in-cluster token could not be re-read
            raise KubeConfigError(f"service account credentials: {error}") from error
        except _CLIENT_FAILURES as error:
            raise self._unreachable(request, error) from error

    def _unreachable(self, request: _Request, error: BaseException) -> Unreachable:
        detail = str(error) or type(error).__name__
        return Unreachable(
            f"cannot reach the API server at {self.host} "
            f"({request.verb} {request.resource.qualified}): {detail}"
        )


async def connect(kubeconfig: Path | None) -> Kube:
    """A client for the cluster: the pod's service account, or ``kubeconfig`` when given."""
    configuration = Configuration()
    try:
        if kubeconfig is None:
            load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            await load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    # A missing file, a missing token, or a kubeconfig of the wrong shape (which
    # the loader reports as whatever its parsing tripped over).
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as error:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster configuration"
        hint = (
            ""
            if kubeconfig
            else " (outside a pod, pass --kubeconfig or ASCEND_DP_KUBECONFIG; in a pod, mount its token)"
        )
        raise KubeConfigError(f"cannot load the {where}: {error or type(error).__name__}{hint}") from error
    log.info("talking to the API server at %s", configuration.host)
    return Kube(ApiClient(configuration))
