"""A small Kubernetes API server on loopback: the real kubernetes-asyncio client talks to it unmodified.

It serves what the plugin touches (nodes, configmaps, events, pods, and resource.k8s.io/v1 resourceslices,
resourceclaims, deviceclasses) as the real server does where the plugin can tell: field selectors on the
fields the real one supports, resourceVersions and their 409s, watches with 410s, bookmarks and selector
transitions, patches that keep a pod's status, bearer tokens. ResourceSlices are admitted as a server of
``kube_version`` would (:mod:`.resource_api`; the real server's rules are tested on it: docs/e2e.md).
The failures a test throws at the plugin (injected statuses, held answers, denied permissions) are the
tests' own: tests/fake_apiserver.py.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ascend_plugin.testing.resource_api import ServerVersion, admit

TOKEN = "test-token"
RESOURCES: tuple[str, ...] = ("nodes", "configmaps", "events")
KINDS = {"nodes": "Node", "configmaps": "ConfigMap", "events": "Event"}

# -- pods (Volcano mode) ----------------------------------------------------------------------
RESOURCES = (*RESOURCES, "pods")
KINDS = {**KINDS, "pods": "Pod"}
# A Node's status subresource: only the status of what is written there is kept.
NODE_STATUS = "nodes/status"
RESOURCES = (*RESOURCES, NODE_STATUS)
# The field labels the real server accepts in a field selector, per kind (metadata.* for all).
FIELD_LABELS = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": ("spec.unschedulable",),
}
_SELECTOR_TERM = re.compile(r"^([A-Za-z.]+)(==|!=|=)(.*)$")


def field_value(obj: Mapping[str, Any], label: str) -> str:
    """The value of a field label as a selector compares it (absent: empty)."""
    value: Any = obj
    for part in label.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def parse_field_selector(
    selector: str, resource: str, more: tuple[str, ...] = ()
) -> list[tuple[str, bool, str]]:
    """(label, equal, value) per term; the real server's 400 for a label it does not support (the kind's
    labels, ``more`` besides)."""
    terms = []
    for term in filter(None, selector.split(",")):
        match = _SELECTOR_TERM.match(term)
        if match is None:
            raise ApiFailure(400, f"invalid field selector: {term!r}")
        label, operator, value = match.groups()
        if label not in ("metadata.name", "metadata.namespace", *FIELD_LABELS.get(resource, ()), *more):
            raise ApiFailure(400, f"field label not supported: {label}", "BadRequest")
        terms.append((label, operator != "!=", value))
    return terms


@dataclass
class Recorded:
    """One request the server received, and the status it was answered with."""

    verb: str  # get, list, watch, create, update, patch, delete
    resource: str
    namespace: str
    name: str
    body: Any
    at: float  # time.monotonic() when it arrived
    content_type: str = ""
    status: int = 0
    query: dict[str, str] = field(default_factory=dict)  # its query parameters

    @property
    def dry_run(self) -> bool:
        """dryRun=All: admitted and answered, nothing stored."""
        return self.query.get("dryRun") == "All"


@dataclass(frozen=True)
class Change:
    """One entry of the watch history."""

    version: int
    resource: str
    namespace: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]
    previous: dict[str, Any] | None = None  # the object before a MODIFIED change


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_body(
    code: int, message: str, reason: str | None = None, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A metav1.Status as the API server sends with an error."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, "Unknown"),
        "code": code,
    }
    return body | ({"details": dict(details)} if details else {})


def invalid(kind: str, group: str, name: str, problems: list[str]) -> ApiFailure:
    """The 422 the server answers an invalid object with: each problem (``field: Type: detail``) a cause."""
    causes = [dict(zip(("field", "message"), problem.split(": ", 1), strict=True)) for problem in problems]
    details = {"name": name, "group": group, "kind": kind, "causes": causes}
    qualified = f"{kind}.{group}" if group else kind
    return ApiFailure(422, f'{qualified} "{name}" is invalid: {", ".join(problems)}', "Invalid", details)


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Strategic merge as far as plain objects go: maps merge, null deletes, the rest replaces."""
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = merge_patch(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _pointer(path: str) -> list[str]:
    """An RFC 6901 JSON pointer's tokens (``~1`` is '/', ``~0`` is '~')."""
    if not path.startswith("/"):
        raise ApiFailure(422, f"the JSON pointer {path!r} does not start with '/'")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def json_patch(target: dict[str, Any], operations: object) -> dict[str, Any]:
    """RFC 6902 ``add``, ``remove``, ``replace`` and ``test`` on objects, all or none; a failure is a 422
    as the real server's (a ``test`` that fails, a path that does not exist)."""
    if not isinstance(operations, list):
        raise ApiFailure(400, "a JSON patch is a list of operations")
    result = copy.deepcopy(target)
    for operation in operations:
        op, path = operation.get("op"), operation.get("path", "")
        *parents, last = _pointer(path)
        node: Any = result
        for token in parents:
            if not isinstance(node, dict) or token not in node:
                raise ApiFailure(422, f"{op} operation does not apply: doc is missing path: {path}")
            node = node[token]
        if not isinstance(node, dict):
            raise ApiFailure(422, f"{op} operation does not apply: {path} is not in an object")
        if op == "test":
            if node.get(last) != operation.get("value"):
                raise ApiFailure(422, f"testing value {path} failed: test failed")
        elif op in ("remove", "replace") and last not in node:
            raise ApiFailure(422, f"{op} operation does not apply: doc is missing key: {path}")
        elif op == "remove":
            del node[last]
        elif op in ("add", "replace"):
            node[last] = copy.deepcopy(operation.get("value"))
        else:
            raise ApiFailure(400, f"unsupported JSON patch operation {op!r}")
    return result


def _keep_status(resource: str, current: Mapping[str, Any], updated: dict[str, Any]) -> dict[str, Any]:
    """A pod written through its main resource keeps its status (status is a subresource)."""
    if resource != "pods":
        return updated
    kept = dict(updated)
    if "status" in current:
        kept["status"] = copy.deepcopy(current["status"])
    else:
        kept.pop("status", None)
    return kept


class ApiFailure(Exception):
    """An error answer; the handler turns it into a Status response."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.details = details


@dataclass
class FakeApiServer:
    """The fake API server; use ``async with`` or :meth:`start` / :meth:`stop`."""

    token: str = TOKEN
    port: int = 0
    namespaces: set[str] = field(default_factory=lambda: {"default", "kube-system"})
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    history: list[Change] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    version: int = 1000
    oldest_watchable: int = 0  # watches from before this version get 410
    kube_version: str = "1.34"  # the release whose resource.k8s.io rules and gate defaults apply
    gates: dict[str, bool] = field(default_factory=dict)  # feature gates set against the release's default
    bookmark_interval: float = 60.0  # seconds between a watch's bookmarks (the watch cache's frequency)
    bookmarks_sent: int = 0
    # Resources whose watches stay open but pass no event on (a proxy that swallows them).
    muted_watches: set[str] = field(default_factory=set)
    # Resources whose watches end at once, 200 with no body (a proxy that closes streams after the headers).
    cut_watch_resources: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._dropping = asyncio.Event()
        self._ending = asyncio.Event()
        self._bookmark_round = 0  # send_bookmarks() calls so far
        self._names = itertools.count(1)

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen (again) on 127.0.0.1, on the same port as before if there was one."""
        app = web.Application()
        app.router.add_route("*", "/api/v1/{resource}", self._handle)
        app.router.add_route("*", "/api/v1/{resource}/{name}", self._handle)
        app.router.add_route("*", "/api/v1/{resource}/{name}/{subresource}", self._handle)
        app.router.add_route("*", "/api/v1/namespaces/{namespace}/{resource}", self._handle)
        app.router.add_route("*", "/api/v1/namespaces/{namespace}/{resource}/{name}", self._handle)
        app.router.add_route("POST", "/apis/authorization.k8s.io/v1/{resource}", self._handle)
        app.router.add_route("*", f"/apis/{DRA_VERSION}/{{resource}}", self._handle)
        app.router.add_route("*", f"/apis/{DRA_VERSION}/{{resource}}/{{name}}", self._handle)
        app.router.add_route("*", f"/apis/{DRA_VERSION}/namespaces/{{namespace}}/{{resource}}", self._handle)
        app.router.add_route(
            "*", f"/apis/{DRA_VERSION}/namespaces/{{namespace}}/{{resource}}/{{name}}", self._handle
        )
        self._stopping = asyncio.Event()
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self._runner = runner
        if not self.port:
            self.port = runner.addresses[0][1]

    async def stop(self) -> None:
        """Go down: open watches end, new connections are refused."""
        if self._runner is None:
            return
        self._stopping.set()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this server with its bearer token (JSON is YAML too)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "plugin", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "plugin"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    # -- switches ----------------------------------------------------------------------------

    def expire_watches(self) -> None:
        """Compact the history: open watches end, and resuming them from their version gets 410."""
        self.oldest_watchable = self.version + 1
        self._notify()

    def compact(self) -> None:
        """Forget the history before now: open watches go on; watching from an older version gets 410."""
        self.oldest_watchable = self.version

    def end_watches(self) -> None:
        """End every open watch cleanly, as the server does at the watch's timeout."""
        ending, self._ending = self._ending, asyncio.Event()
        ending.set()

    def drop_watches(self) -> None:
        """Cut every open watch's connection mid-stream (the client sees a broken response)."""
        dropping, self._dropping = self._dropping, asyncio.Event()
        dropping.set()

    def mute_watches(self, resource: str) -> None:
        """Watches of ``resource`` (open and new) stay open and pass nothing on, without an error."""
        self.muted_watches.add(resource)

    def cut_watches(self, *resources: str) -> None:
        """New watches of ``resources`` are answered 200 and end at once, without a byte of body."""
        self.cut_watch_resources.update(resources)

    def send_bookmarks(self) -> None:
        """Every open watch that allows bookmarks gets one now, with the current resourceVersion."""
        self._bookmark_round += 1
        self._notify()

    def resource_version(self, version: int | None = None) -> str:
        """How a version is written in objects and lists (the current one by default)."""
        return str(self.version if version is None else version)

    def _version_of(self, text: str) -> int:
        """The version a client's resourceVersion stands for; 400 for one this server never handed out."""
        if not text.isdigit():
            raise ApiFailure(400, f"invalid resource version: {text!r}", "BadRequest")
        return int(text)

    # -- state, as another client would change it --------------------------------------------

    def get(self, resource: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        found = self.objects.get((resource, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or overwrite an object directly (as kubectl would), bumping its resourceVersion."""
        metadata = obj.setdefault("metadata", {})
        key = (resource, metadata.get("namespace", ""), metadata["name"])
        return self._store(key, obj, "MODIFIED" if key in self.objects else "ADDED")

    def delete(self, resource: str, name: str, namespace: str = "") -> None:
        key = (resource, namespace, name)
        removed = self.objects.pop(key)
        self._record_change(key, "DELETED", removed)

    def add_node(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self.put(
            "nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}},
        )

    # -- internals ---------------------------------------------------------------------------------

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _record_change(
        self,
        key: tuple[str, str, str],
        kind: str,
        obj: dict[str, Any],
        previous: dict[str, Any] | None = None,
    ) -> None:
        self.version += 1
        if kind == "DELETED":
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = self.resource_version()
        self.history.append(Change(self.version, key[0], key[1], kind, copy.deepcopy(obj), previous))
        self._notify()

    def _store(
        self, key: tuple[str, str, str], obj: dict[str, Any], kind: str, dry_run: bool = False
    ) -> dict[str, Any]:
        """Store ``obj`` at ``key``; ``dry_run``: admit it, answer what would be stored, keep nothing."""
        resource, namespace, name = key
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", DRA_VERSION if resource in DRA_KINDS else "v1")
        obj.setdefault("kind", KINDS.get(resource) or DRA_KINDS[resource])
        metadata = obj.setdefault("metadata", {})
        metadata["name"] = name
        if namespace:
            metadata["namespace"] = namespace
        previous = self.objects.get(key)
        self._admit(resource, obj, previous)
        new_uid = str(uuid.uuid4()) if resource in DRA_KINDS else f"uid-{resource}-{name}"
        metadata["uid"] = previous["metadata"]["uid"] if previous else new_uid
        metadata.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        if dry_run:
            return copy.deepcopy(obj)
        metadata["resourceVersion"] = self.resource_version(self.version + 1)
        self.objects[key] = obj
        self._record_change(key, kind, obj, copy.deepcopy(previous) if kind == "MODIFIED" else None)
        return copy.deepcopy(obj)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        resource = request.match_info["resource"]
        if subresource := request.match_info.get("subresource"):
            resource = f"{resource}/{subresource}"
        namespace = request.match_info.get("namespace", "")
        name = request.match_info.get("name", "")
        verb = self._verb(request.method, bool(name), request.query.get("watch", "").lower() in ("true", "1"))
        body = await request.json() if request.can_read_body else None
        recorded = Recorded(
            verb,
            resource,
            namespace,
            name,
            body,
            time.monotonic(),
            request.content_type,
            query=dict(request.query),
        )
        self.requests.append(recorded)
        response = await self._answer(request, recorded)
        recorded.status = response.status
        return response

    async def _answer(self, request: web.Request, recorded: Recorded) -> web.StreamResponse:
        verb, resource, namespace, name = recorded.verb, recorded.resource, recorded.namespace, recorded.name
        try:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                raise ApiFailure(401, "Unauthorized")
            if (answered := await self._intercept(request, recorded)) is not None:
                return answered
            if resource not in (*RESOURCES, *DRA_KINDS):
                raise ApiFailure(404, f"the server could not find the requested resource ({resource})")
            if verb == "watch":
                return await self._watch(request, resource, namespace)
            result, code = self._dispatch(request, verb, (resource, namespace, name), recorded.body)
            await self._answering(recorded)
            return web.json_response(result, status=code)
        except ApiFailure as failure:
            return web.json_response(
                status_body(failure.code, str(failure), failure.reason, failure.details), status=failure.code
            )

    async def _intercept(self, request: web.Request, recorded: Recorded) -> web.StreamResponse | None:
        """A test's answer to a request before the server's own (None: the server answers)."""
        return None

    async def _answering(self, recorded: Recorded) -> None:
        """Return when the answer to ``recorded`` may go (its change is done): a test holds some back."""

    @staticmethod
    def _verb(method: str, named: bool, watch: bool) -> str:
        if method == "GET":
            return "get" if named else ("watch" if watch else "list")
        deleting = "delete" if named else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": deleting}[method]

    def _dispatch(
        self, request: web.Request, verb: str, key: tuple[str, str, str], body: Any
    ) -> tuple[dict[str, Any], int]:
        resource, namespace, name = key
        if resource == NODE_STATUS:
            return self._status(request, verb, name, body)
        if verb == "list":  # in a namespace that does not exist, too: it is empty
            return self._list(request, resource, namespace), 200
        if namespace and namespace not in self.namespaces:
            raise ApiFailure(404, f'namespaces "{namespace}" not found')
        current = self.objects.get(key)
        if verb == "create":
            return self._create(resource, namespace, body, request.query.get("dryRun") == "All"), 201
        if verb == "deletecollection":
            return self._delete_collection(request, resource, namespace), 200
        if current is None:
            raise ApiFailure(404, f'{resource} "{name}" not found')
        if verb == "get":
            return copy.deepcopy(current), 200
        if verb == "update":
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                raise ApiFailure(
                    409,
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )
            return self._store(key, _keep_status(resource, current, body), "MODIFIED"), 200
        if verb == "patch":
            if "json-patch" in request.content_type:
                raise ApiFailure(415, "only merge patches are supported here")
            preconditions = (body.get("metadata") or {}) if isinstance(body, dict) else {}
            uid = preconditions.get("uid")
            if uid and uid != current["metadata"]["uid"]:
                raise ApiFailure(
                    409,
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {current['metadata']['uid']}",
                )
            sent = preconditions.get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                raise ApiFailure(
                    409,
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )
            patched = _keep_status(resource, current, merge_patch(current, body))
            return self._store(key, patched, "MODIFIED"), 200
        self._check_preconditions(resource, current, body)
        self.delete(resource, name, namespace)
        return status_body(200, "deleted", "Deleted") | {"status": "Success"}, 200

    def _status(self, request: web.Request, verb: str, name: str, body: Any) -> tuple[dict[str, Any], int]:
        """A Node's status subresource: read, or patched (JSON or merge patch) with only its status kept."""
        key = ("nodes", "", name)
        current = self.objects.get(key)
        if current is None:
            raise ApiFailure(404, f'nodes "{name}" not found')
        if verb == "get":
            return copy.deepcopy(current), 200
        if verb != "patch":
            raise ApiFailure(405, f"the stand-in does not {verb} {NODE_STATUS}")
        if "json-patch" in request.content_type:
            patched = json_patch(current, body)
        else:
            patched = merge_patch(current, body)
        kept = copy.deepcopy(current)
        kept["status"] = patched.get("status", {})
        return self._store(key, kept, "MODIFIED"), 200

    def _watch_event(
        self, request: web.Request, resource: str, namespace: str, change: Change
    ) -> dict[str, Any] | None:
        """What a watch with this request's selector sees of ``change``, if anything."""
        key = (change.resource, change.namespace, change.object["metadata"]["name"])
        now = self._selected(request, resource, namespace, key, change.object)
        before = change.previous is not None and self._selected(
            request, resource, namespace, key, change.previous
        )
        if change.type != "MODIFIED" or (now and before):
            return {"type": change.type, "object": change.object} if now else None
        if now:
            return {"type": "ADDED", "object": change.object}
        if before and change.previous is not None:
            gone = copy.deepcopy(change.previous)
            gone["metadata"]["resourceVersion"] = change.object["metadata"]["resourceVersion"]
            return {"type": "DELETED", "object": gone}
        return None

    def _create(
        self, resource: str, namespace: str, body: dict[str, Any], dry_run: bool = False
    ) -> dict[str, Any]:
        metadata = body.setdefault("metadata", {})
        if resource in DRA_KINDS and not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = generated_name(metadata["generateName"])
        name = metadata.get("name") or f"{metadata.get('generateName', 'object-')}{next(self._names):05d}"
        key = (resource, namespace, name)
        if key in self.objects:
            raise ApiFailure(409, f'{resource} "{name}" already exists', "AlreadyExists")
        return self._store(key, body, "ADDED", dry_run)

    def _selected(
        self,
        request: web.Request,
        resource: str,
        namespace: str,
        key: tuple[str, str, str],
        obj: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether the object at ``key`` (with content ``obj``, default: as stored) matches the request."""
        more = NEWER_FIELD_LABELS.get(resource, ()) if self.server.release >= (1, 37) else ()
        terms = parse_field_selector(request.query.get("fieldSelector", ""), resource, more)
        if key[0] != resource or (namespace and key[1] != namespace):
            return False
        content = obj if obj is not None else self.objects.get(key, {})
        return all((field_value(content, label) == value) == equal for label, equal, value in terms)

    def _list(self, request: web.Request, resource: str, namespace: str) -> dict[str, Any]:
        items = [
            copy.deepcopy(obj)
            for key, obj in self.objects.items()
            if self._selected(request, resource, namespace, key)
        ]
        return {
            "kind": f"{KINDS.get(resource) or DRA_KINDS[resource]}List",
            "apiVersion": DRA_VERSION if resource in DRA_KINDS else "v1",
            "metadata": {"resourceVersion": self.resource_version()},
            "items": items,
        }

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        return response

    async def _watch_error(self, request: web.Request, code: int) -> web.StreamResponse:
        response = await self._stream(request)
        message = "too old resource version" if code == 410 else f"injected {code} for watch"
        await response.write(
            json.dumps({"type": "ERROR", "object": status_body(code, message)}).encode() + b"\n"
        )
        return response

    async def _watch(self, request: web.Request, resource: str, namespace: str) -> web.StreamResponse:
        # Taken before the first await: a switch thrown once the request is recorded reaches this watch.
        stopping, dropping, ending = self._stopping, self._dropping, self._ending
        bookmark_round = self._bookmark_round
        start = request.query.get("resourceVersion", "")
        timeout = float(request.query.get("timeoutSeconds", "300"))
        bookmarks = request.query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        since = self._version_of(start) if start not in ("", "0") else self.version
        if since < self.oldest_watchable:
            return await self._watch_error(request, 410)
        response = await self._stream(request)
        if resource in self.cut_watch_resources:
            return response
        if start in ("", "0"):
            for key, obj in list(self.objects.items()):
                if self._selected(request, resource, namespace, key):
                    await response.write(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = self._next_bookmark(loop.time(), deadline) if bookmarks else None
        while not (stopping.is_set() or ending.is_set()) and since >= self.oldest_watchable:
            if dropping.is_set():
                assert request.transport is not None
                request.transport.abort()  # mid-stream: no last chunk, the client sees a broken response
                return response
            for change in [c for c in self.history if c.version > since]:
                since = change.version
                event = self._watch_event(request, resource, namespace, change)
                if event is not None and resource not in self.muted_watches:
                    await response.write(json.dumps(event).encode() + b"\n")
            now = loop.time()
            due = next_bookmark is not None and now >= next_bookmark
            if bookmarks and (due or bookmark_round != self._bookmark_round):
                await response.write(json.dumps(self._bookmark(resource)).encode() + b"\n")
                self.bookmarks_sent += 1
                bookmark_round = self._bookmark_round
                next_bookmark = self._next_bookmark(now, deadline)
            changed = self._changed
            wake_at = min(deadline, next_bookmark) if next_bookmark is not None else deadline
            if deadline - now <= 0:
                break
            waiters = [asyncio.ensure_future(event.wait()) for event in (changed, stopping, dropping, ending)]
            _, pending = await asyncio.wait(
                waiters, timeout=max(wake_at - now, 0), return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in pending:
                waiter.cancel()
        return response

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """When a watch's next bookmark is due: the interval on, or 2 s before its end (None: neither)."""
        due = min(now + self.bookmark_interval, deadline - 2.0)
        return due if due > now else None

    def _bookmark(self, resource: str) -> dict[str, Any]:
        """A BOOKMARK event: an object of the watched kind carrying only the current resourceVersion."""
        return {
            "type": "BOOKMARK",
            "object": {
                "kind": KINDS.get(resource) or DRA_KINDS[resource],
                "apiVersion": DRA_VERSION if resource in DRA_KINDS else "v1",
                "metadata": {"resourceVersion": self.resource_version()},
            },
        }

    # -- resource.k8s.io/v1 (Dynamic Resource Allocation) ---------------------------------------

    def slices(self, driver: str | None = None, node: str | None = None) -> list[dict[str, Any]]:
        """The ResourceSlices stored now (of ``driver`` on ``node`` when given), by name."""
        return [
            copy.deepcopy(obj)
            for (resource, _, _), obj in sorted(self.objects.items())
            if resource == "resourceslices"
            and driver in (None, obj["spec"].get("driver"))
            and node in (None, obj["spec"].get("nodeName"))
        ]

    def wipe_slices(self, node: str, driver: str | None = None) -> int:
        """Delete a node's slices (of one driver), as the kubelet does; how many went."""
        doomed = [slice_["metadata"]["name"] for slice_ in self.slices(driver, node)]
        for name in doomed:
            self.delete("resourceslices", name)
        return len(doomed)

    @property
    def server(self) -> ServerVersion:
        """The release this server plays, with its feature gates."""
        return ServerVersion.of(self.kube_version, self.gates)

    def _admit(self, resource: str, obj: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """What the real API server does to an object on create and update (ResourceSlices, as far as
        :mod:`.resource_api` plays it: the generation counts changes of the spec as sent)."""
        if resource != "resourceslices":
            return
        name = obj["metadata"]["name"]
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            raise invalid("ResourceSlice", DRA_GROUP, name, ["spec: Required value"])
        changed = previous is None or previous["spec"] != spec
        problems = admit(obj, previous, self.server)
        if problems:
            raise invalid("ResourceSlice", DRA_GROUP, name, problems)
        generation = 0 if previous is None else previous["metadata"].get("generation", 1)
        obj["metadata"]["generation"] = generation + (1 if changed else 0)

    def _delete_collection(self, request: web.Request, resource: str, namespace: str) -> dict[str, Any]:
        doomed = [key for key in list(self.objects) if self._selected(request, resource, namespace, key)]
        for key in doomed:
            self.delete(*key[:1], key[2], key[1])
        return status_body(200, f"deleted {len(doomed)}", "Deleted") | {"status": "Success"}

    @staticmethod
    def _check_preconditions(resource: str, current: dict[str, Any], options: Any) -> None:
        """DeleteOptions.preconditions: the object must still be the one the client saw."""
        preconditions = options.get("preconditions") if isinstance(options, dict) else None
        if not isinstance(preconditions, dict):
            return
        metadata = current["metadata"]
        uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
        if uid and uid != metadata.get("uid"):
            raise ApiFailure(
                409,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {metadata.get('uid')}",
            )
        if version and version != metadata.get("resourceVersion"):
            qualified = f"{DRA_KINDS[resource]}.{DRA_GROUP}" if resource in DRA_KINDS else resource
            raise ApiFailure(
                409,
                f'Operation cannot be fulfilled on {qualified} "{metadata["name"]}": the ResourceVersion in '
                f"the precondition ({version}) does not match the ResourceVersion in record "
                f"({metadata.get('resourceVersion')}). The object might have been modified",
                "Conflict",
            )


# -- resource.k8s.io/v1: the API's facts (k8s.io/api/resource/v1, pkg/apis/resource/validation) ----

DRA_GROUP = "resource.k8s.io"
DRA_VERSION = "resource.k8s.io/v1"
DRA_KINDS = {
    "resourceslices": "ResourceSlice",
    "resourceclaims": "ResourceClaim",
    "deviceclasses": "DeviceClass",
}
# Field selectors a ResourceSlice supports besides the object meta's (strategy.go toSelectableFields).
FIELD_LABELS = {**FIELD_LABELS, "resourceslices": ("spec.driver", "spec.nodeName")}
# What 1.37 supports besides (1.34 does not; 1.35 and 1.36 were not run against the real server).
NEWER_FIELD_LABELS = {"resourceslices": ("spec.pool.name",)}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the real server appends to a generateName


def generated_name(base: str) -> str:
    """``generateName`` as the API server expands it: the base cut to 58 characters, 5 random ones."""
    return base[:58] + "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in uuid.uuid4().bytes[:5])
