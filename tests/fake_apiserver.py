"""The API server stand-in (ascend_plugin/testing/kube_apiserver.py) with what only tests throw at it.

* :meth:`FakeApiServer.inject` answers chosen requests with any status (a watch gets an ERROR event);
* :meth:`FakeApiServer.hold` keeps chosen answers back, their change done, so a watch event arrives first;
* authorization: everything is allowed until :meth:`FakeApiServer.deny` takes a permission away; a request
  it covers gets the real server's 403, and a SelfSubjectAccessReview answers whether it is held;
* ``opaque_versions``: resourceVersions that are tokens with no order (the API promises only equality);
* labels and annotations the real server would refuse are refused (422, 400);
* every request is recorded: :meth:`FakeApiServer.requests_of` counts them.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ascend_plugin.testing import kube_apiserver
from ascend_plugin.testing.kube_apiserver import DRA_GROUP, DRA_KINDS, KINDS, RESOURCES, ApiFailure, Recorded

USER = "system:serviceaccount:kube-system:ascend-device-plugin"  # whom the token stands for
REVIEWS = "selfsubjectaccessreviews"
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass
class Injection:
    """Answer matching requests with ``status`` (``times`` of them, or all while None)."""

    status: int
    verb: str | None = None
    resource: str | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, verb: str, resource: str) -> bool:
        return (
            (self.times is None or self.hits < self.times)
            and self.verb in (None, verb)
            and self.resource in (None, resource)
        )


@dataclass
class Hold:
    """Keep the answers of matching requests back, their effect done, until :meth:`release`."""

    verb: str
    resource: str
    released: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0  # answers held back now

    def release(self) -> None:
        self.released.set()


@dataclass(frozen=True)
class Denial:
    """A permission the token does not have: ``verb`` on ``resource`` in ``namespace`` (None: anywhere)."""

    verb: str
    resource: str
    namespace: str | None = None

    def covers(self, verb: str, resource: str, namespace: str) -> bool:
        return (self.verb, self.resource) == (verb, resource) and self.namespace in (None, namespace)


def label_problem(labels: Mapping[str, Any]) -> str | None:
    """Why the API server would refuse these labels (values only: the plugin's keys are fixed)."""
    for value in labels.values():
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            return f"metadata.labels: Invalid value: {value!r}: a valid label must be an empty string or ..."
    return None


def annotation_problem(annotations: Any) -> str | None:
    """Why the real server would refuse to decode these annotations."""
    if not isinstance(annotations, Mapping):
        return "metadata.annotations must be an object of strings"
    for key, value in annotations.items():
        if not isinstance(value, str):
            return (
                f"json: cannot unmarshal {type(value).__name__} into Go struct field of annotations {key!r}"
            )
    return None


@dataclass
class FakeApiServer(kube_apiserver.FakeApiServer):
    """The stand-in with the switches of the tests; use ``async with`` or :meth:`start` / :meth:`stop`."""

    injections: list[Injection] = field(default_factory=list)
    denials: list[Denial] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    opaque_versions: bool = False  # hand out resourceVersions that are not numbers

    def __post_init__(self) -> None:
        super().__post_init__()
        self._tokens: dict[int, str] = {}  # version -> its opaque token
        self._numbers: dict[str, int] = {}  # opaque token -> its version

    # -- switches -----------------------------------------------------------------------------

    def inject(
        self, status: int, verb: str | None = None, resource: str | None = None, times: int | None = None
    ) -> Injection:
        """Answer matching requests with ``status`` from now on (a watch gets it as an ERROR event)."""
        injection = Injection(status, verb, resource, times)
        self.injections.append(injection)
        return injection

    def hold(self, verb: str, resource: str) -> Hold:
        """Answer matching requests only once the hold is released (what they do is done at once)."""
        hold = Hold(verb, resource)
        self.holds.append(hold)
        return hold

    def clear_injections(self) -> None:
        self.injections.clear()

    def deny(self, verb: str, resource: str, namespace: str | None = None) -> Denial:
        """Take away the permission to ``verb`` ``resource`` (in ``namespace``, or anywhere)."""
        denial = Denial(verb, resource, namespace)
        self.denials.append(denial)
        return denial

    def allows(self, verb: str, resource: str, namespace: str = "") -> bool:
        return not any(denial.covers(verb, resource, namespace) for denial in self.denials)

    # -- what tests read ----------------------------------------------------------------------

    def node_labels(self, name: str) -> dict[str, str]:
        node = self.get("nodes", name)
        return dict(node["metadata"].get("labels", {})) if node else {}

    def events(self) -> list[dict[str, Any]]:
        return [obj for (resource, _, _), obj in self.objects.items() if resource == "events"]

    def requests_of(
        self, verb: str, resource: str, status: int | None = None, *, dry_run: bool = False
    ) -> list[Recorded]:
        """The requests of ``verb`` on ``resource`` so far (answered ``status``, if given); dry runs
        write nothing and are left out, unless ``dry_run`` asks for them alone."""
        return [
            r
            for r in self.requests
            if r.verb == verb
            and r.resource == resource
            and (status is None or r.status == status)
            and r.dry_run == dry_run
        ]

    # -- resourceVersions -----------------------------------------------------------------------

    def resource_version(self, version: int | None = None) -> str:
        number = self.version if version is None else version
        if not self.opaque_versions:
            return str(number)
        if number not in self._tokens:
            token = f"rv-{secrets.token_hex(6)}"
            while token in self._numbers:
                token = f"rv-{secrets.token_hex(6)}"
            self._tokens[number], self._numbers[token] = token, number
        return self._tokens[number]

    def _version_of(self, text: str) -> int:
        if not self.opaque_versions:
            return super()._version_of(text)
        number = self._numbers.get(text)
        if number is None:
            raise ApiFailure(400, f"invalid resource version: {text!r}", "BadRequest")
        return number

    # -- the hooks ------------------------------------------------------------------------------

    async def _intercept(self, request: web.Request, recorded: Recorded) -> web.StreamResponse | None:
        verb, resource, namespace, name = recorded.verb, recorded.resource, recorded.namespace, recorded.name
        if resource not in (*RESOURCES, *DRA_KINDS, REVIEWS):
            return None  # the server's 404
        for injection in self.injections:
            if injection.matches(verb, resource):
                injection.hits += 1
                if verb == "watch":
                    return await self._watch_error(request, injection.status)
                raise ApiFailure(injection.status, f"injected {injection.status} for {verb} {resource}")
        if resource == REVIEWS:
            return web.json_response(self._review(recorded.body), status=201)
        if not self.allows(verb, resource, namespace):
            raise ApiFailure(403, self._forbidden(verb, resource, namespace, name))
        return None

    async def _answering(self, recorded: Recorded) -> None:
        for hold in self.holds:
            if (hold.verb, hold.resource) == (
                recorded.verb,
                recorded.resource,
            ) and not hold.released.is_set():
                hold.waiting += 1
                await hold.released.wait()
                hold.waiting -= 1

    def _admit(self, resource: str, obj: dict[str, Any], previous: dict[str, Any] | None) -> None:
        metadata = obj["metadata"]
        kind = KINDS.get(resource) or DRA_KINDS[resource]
        if problem := label_problem(metadata.get("labels") or {}):
            raise ApiFailure(422, f'{kind} "{metadata["name"]}" is invalid: {problem}')
        if "annotations" in metadata and (problem := annotation_problem(metadata["annotations"])):
            raise ApiFailure(400, f'{kind} "{metadata["name"]}": {problem}')
        super()._admit(resource, obj, previous)

    def _review(self, body: Any) -> dict[str, Any]:
        """A SelfSubjectAccessReview, answered from the denials."""
        spec = body.get("spec", {}) if isinstance(body, dict) else {}
        attributes = spec.get("resourceAttributes") or {}
        allowed = self.allows(
            attributes.get("verb", ""), attributes.get("resource", ""), attributes.get("namespace", "")
        )
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": {"allowed": allowed} | ({"reason": "RBAC: allowed by the fake"} if allowed else {}),
        }

    @staticmethod
    def _forbidden(verb: str, resource: str, namespace: str, name: str) -> str:
        """The real API server's wording of a 403."""
        group = DRA_GROUP if resource in DRA_KINDS else ""
        qualified = f"{resource}.{group}" if group else resource
        target = f'{qualified} "{name}"' if name else qualified
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        who = f'User "{USER}" cannot {verb} resource "{resource}"'
        return f'{target} is forbidden: {who} in API group "{group}" {scope}'
