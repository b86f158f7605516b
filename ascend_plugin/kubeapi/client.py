"""The few API calls the plugin makes, on kubernetes-asyncio, with JSON in and out.

Each call goes by its REST route (one :class:`Resource` row per kind) and hands back plain JSON: the
untyped client's ``Any`` stays here, and every failure leaves as an exception of :mod:`.errors`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from ascend_plugin.kubeapi.errors import ApiError, KubeConfigError, KubeError, Unreachable, api_error
from ascend_plugin.kubeapi.lean_import import (
    ApiClient,
    ConfigException,
    Configuration,
    load_incluster_config,
    load_kube_config,
)

log = logging.getLogger(__name__)

JsonObject = dict[str, object]

REQUEST_TIMEOUT = 10.0  # seconds for one ordinary request, connect to last byte
# A watch ends on the server's side after this many seconds and is then renewed;
# reading may take a little longer before a silent connection counts as dead.
WATCH_TIMEOUT = 180
WATCH_READ_SLACK = 30.0
# The longest watch event line read: an object is at most about 1.5 MiB in a default etcd, and its JSON
# escaped into a line can be a few times that. (aiohttp's own line limit, twice the read buffer, is 4 MiB
# with kubernetes-asyncio's, and its LineTooLong is none of the client's errors.)
MAX_EVENT_LINE = 8 * 1024 * 1024


EVERYWHERE = "list everywhere"  # the key of a namespaced kind's call that lists (and watches) all namespaces
JSON = "application/json"
# What the client sent for a patch with a JSON object body: the strategic merge the kubelet and kubectl use.
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# RFC 6902: a list of operations, a failed ``test`` refusing the whole patch (422).
JSON_PATCH = "application/json-patch+json"
_METHODS = {
    "get": "GET",
    "list": "GET",
    EVERYWHERE: "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
}


@dataclass(frozen=True)
class Route:
    """One call of the REST API: its HTTP method and its path, ``{namespace}`` and ``{name}`` filled in."""

    method: str
    path: str


@dataclass(frozen=True)
class Resource:
    """A kind of object (its plural as RBAC names it, its API group) and the calls the plugin makes on it:
    verb as RBAC names it (a watch is a list; :data:`EVERYWHERE`: across namespaces) -> REST route."""

    plural: str
    namespaced: bool
    calls: Mapping[str, Route] = field(compare=False)
    group: str = ""  # "" is the core group (/api/v1)

    @classmethod
    def of(cls, plural: str, verbs: tuple[str, ...], *, namespaced: bool, group: str = "") -> Resource:
        """A kind with the routes of ``verbs``, as the API lays them out."""
        prefix = f"/apis/{group}/v1" if group else "/api/v1"
        collection = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
        paths = {EVERYWHERE: f"{prefix}/{plural}", "list": collection, "create": collection}
        calls = {verb: Route(_METHODS[verb], paths.get(verb, f"{collection}/{{name}}")) for verb in verbs}
        return cls(plural, namespaced, calls, group)

    @property
    def qualified(self) -> str:
        """``<group>/<plural>`` (just the plural in the core group), as errors name it."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    def call(self, verb: str, namespace: str | None = None) -> Route:
        """The route for ``verb`` in ``namespace`` (None: every namespace, for a list or a watch)."""
        if verb == "watch":
            verb = "list"
        if verb == "list" and self.namespaced and namespace is None:
            verb = EVERYWHERE
        try:
            return self.calls[verb]
        except KeyError:
            raise LookupError(
                f"the plugin makes no {verb!r} call on {self.qualified}; "
                "add its route to the kind's calls (ascend_plugin/kubeapi/client.py)"
            ) from None


NODES = Resource.of("nodes", ("get", "list", "patch"), namespaced=False)
# A Node's status subresource, named as RBAC names it: an older family's leftover extended resources.
NODE_STATUS = Resource("nodes/status", False, {"patch": Route("PATCH", "/api/v1/nodes/{name}/status")})
CONFIGMAPS = Resource.of("configmaps", ("get", "list", "create", "update"), namespaced=True)
EVENTS = Resource.of("events", ("create",), namespaced=True)
PODS = Resource.of("pods", ("get", EVERYWHERE, "patch"), namespaced=True)
# Dynamic Resource Allocation, resource.k8s.io/v1 (Kubernetes 1.34 and later).
RESOURCE_SLICES = Resource.of(
    "resourceslices", ("get", "list", "create", "update", "delete"), namespaced=False, group="resource.k8s.io"
)
RESOURCE_CLAIMS = Resource.of("resourceclaims", ("get",), namespaced=True, group="resource.k8s.io")

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
    return string_map(mapping_field(obj, "metadata"), "labels")


def _json_object(raw: bytes) -> JsonObject | None:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's parser goes
        return None
    return parsed if isinstance(parsed, dict) else None


async def _lines(content: Any, limit: int, what: str) -> AsyncGenerator[bytes, None]:
    """The lines of the streamed body of ``what``, each at most ``limit`` bytes; a longer one is a KubeError
    (aiohttp's ``readline`` has a limit by version, and an error of its own)."""
    buffer = bytearray()
    scanned = 0  # the part of the buffer known to hold no newline
    while chunk := await content.readany():
        buffer += chunk
        while (end := buffer.find(b"\n", scanned)) >= 0 or len(buffer) > limit:
            if not 0 <= end <= limit:
                raise KubeError(f"{what}: an event of over {limit} bytes; an object this large is not read")
            yield bytes(buffer[:end])
            del buffer[: end + 1]
            scanned = 0
        scanned = len(buffer)
    if buffer:
        yield bytes(buffer)


def _status_message(raw: bytes) -> str:
    """The message of a Status body, or the start of whatever came back."""
    body = _json_object(raw)
    if body is not None and isinstance(body.get("message"), str):
        return str(body["message"])
    return raw[:300].decode("utf-8", "replace").strip() or "(no message)"


@dataclass(frozen=True)
class _Request:
    """What one request is about: the route it takes (for a verb as RBAC names it), and its target."""

    verb: str
    resource: Resource
    route: Route
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
        self.host: str = api_client.configuration.host

    async def close(self) -> None:
        await self.api_client.close()

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonObject:
        return await self._call(_Request("get", resource, resource.call("get"), namespace, name))

    async def list(self, resource: Resource, namespace: str | None, field_selector: str) -> Listing:
        request = _Request("list", resource, resource.call("list", namespace), namespace)
        body = await self._call(request, query={"fieldSelector": field_selector})
        raw_items = body.get("items")
        items = [item for item in raw_items if isinstance(item, dict)] if isinstance(raw_items, list) else []
        version = string_field(mapping_field(body, "metadata"), "resourceVersion")
        return Listing(items, version)

    async def create(
        self, resource: Resource, namespace: str, body: JsonObject, *, dry_run: bool = False
    ) -> JsonObject:
        """Create an object; ``dry_run``: only as far as admission and validation, nothing stored."""
        request = _Request("create", resource, resource.call("create"), namespace)
        return await self._call(request, body, query={"dryRun": "All"} if dry_run else None)

    async def replace(self, resource: Resource, name: str, namespace: str, body: JsonObject) -> JsonObject:
        """Replace an object; a stale ``metadata.resourceVersion`` in ``body`` raises Conflict."""
        return await self._call(_Request("update", resource, resource.call("update"), namespace, name), body)

    async def patch(
        self, resource: Resource, name: str, namespace: str | None, body: JsonObject
    ) -> JsonObject:
        """Strategic-merge-patch an object (the client's default content type for a dict body)."""
        return await self._call(_Request("patch", resource, resource.call("patch"), namespace, name), body)

    async def json_patch(
        self, resource: Resource, name: str, namespace: str | None, operations: Sequence[JsonObject]
    ) -> JsonObject:
        """Apply RFC 6902 ``operations`` at once: all or none (a failed ``test`` is a 422)."""
        request = _Request("patch", resource, resource.call("patch"), namespace, name)
        return await self._call(request, operations, content=JSON_PATCH)

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
        return await self._call(request, options)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        field_selector: str,
        resource_version: str,
        timeout_seconds: int = WATCH_TIMEOUT,
    ) -> AsyncGenerator[WatchEvent, None]:
        """The events after ``resource_version`` until the server ends the stream; an ERROR event raises
        its status (410 Gone: the version is too old, list again)."""
        request = _Request("watch", resource, resource.call("watch", namespace), namespace)
        query = {
            "fieldSelector": field_selector,
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
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
            async for line in _lines(response.content, MAX_EVENT_LINE, f"watch {request.resource.qualified}"):
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
        body: JsonObject | Sequence[JsonObject] | None = None,
        query: Mapping[str, object] | None = None,
        content: str | None = None,
    ) -> JsonObject:
        response = await self._send(request, body, query or {}, deadline=REQUEST_TIMEOUT, content=content)
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
        body: JsonObject | Sequence[JsonObject] | None,
        query: Mapping[str, object],
        *,
        deadline: float | aiohttp.ClientTimeout,
        content: str | None = None,
    ) -> Any:
        """Start one request; the aiohttp response (status not checked yet)."""
        route = request.route
        names = {"name": request.name}
        if request.resource.namespaced and request.namespace is not None:
            names["namespace"] = request.namespace
        content = content or (STRATEGIC_MERGE_PATCH if route.method == "PATCH" else JSON)
        try:
            return await self.api_client.call_api(
                route.path,
                route.method,
                path_params={key: value for key, value in names.items() if f"{{{key}}}" in route.path},
                query_params=list(query.items()),
                header_params={"Accept": JSON, "Content-Type": content},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=deadline,
            )
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
            load_incluster_config(client_configuration=configuration)
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
