"""A small synchronous client of the real API server, for the end-to-end tests' own calls.

The tests act as an administrator (apply the chart's objects, create pods, read what the plugin
wrote) or as the plugin's ServiceAccount (to show what its RBAC refuses). Objects are plain dicts
as the API server sends them; kinds are found through the server's own discovery, so any object
the chart renders can be applied with server-side apply, as ``kubectl apply --server-side`` does.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
FIELD_MANAGER = "ascend-e2e"


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.status = status
        self.body = body
        try:
            self.reason = json.loads(body).get("reason", "")
            self.message = json.loads(body).get("message", body)
        except ValueError:
            self.reason, self.message = "", body
        super().__init__(f"{method} {path}: {status} {self.message}")


@dataclass(frozen=True)
class Kind:
    """Where one kind lives on the server."""

    group_version: str  # "v1" or "apps/v1"
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = (
            f"/api/{self.group_version}" if "/" not in self.group_version else f"/apis/{self.group_version}"
        )
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.plural} is namespaced: a namespace is needed")
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


class Api:
    """Calls to one API server as one user (a bearer token)."""

    def __init__(self, server: str, ca: Path, token: str) -> None:
        self.server = server
        self.token = token
        self._tls = ssl.create_default_context(cafile=str(ca))
        self._kinds: dict[tuple[str, str], Kind] = {}

    def as_user(self, token: str) -> Api:
        """The same server with another user's token."""
        other = Api.__new__(Api)
        other.server, other.token, other._tls, other._kinds = self.server, token, self._tls, self._kinds
        return other

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        timeout: float = 30,
    ) -> Any:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        ask = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(ask, context=self._tls, timeout=timeout) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as refused:
            raise ApiError(method, path, refused.code, refused.read().decode(errors="replace")) from None
        return json.loads(text) if text.startswith(("{", "[")) else text

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query or None)

    def watch(self, path: str, seconds: int, **query: str) -> list[Obj]:
        """The events a watch of ``path`` gets until the server ends it after ``seconds``."""
        query = {**query, "watch": "1", "timeoutSeconds": str(seconds)}
        url = f"{self.server}{path}?{urllib.parse.urlencode(query)}"
        ask = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(ask, context=self._tls, timeout=seconds + 30) as answer:
                lines = answer.read().decode().splitlines()
        except urllib.error.HTTPError as refused:
            raise ApiError("GET", path, refused.code, refused.read().decode(errors="replace")) from None
        return [json.loads(line) for line in lines if line.strip()]

    # -- kinds ----------------------------------------------------------------------------------

    def kind(self, api_version: str, kind: str) -> Kind:
        key = (api_version, kind)
        if key not in self._kinds:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for resource in self.get(prefix)["resources"]:
                if "/" not in resource["name"]:
                    self._kinds[(api_version, resource["kind"])] = Kind(
                        api_version, resource["name"], resource["namespaced"]
                    )
        if key not in self._kinds:
            raise KeyError(f"the API server serves no {kind} in {api_version}")
        return self._kinds[key]

    def _kind_of(self, obj: Mapping[str, Any]) -> Kind:
        return self.kind(obj["apiVersion"], obj["kind"])

    # -- objects --------------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        """Server-side apply of one object (created or updated), as this client's field manager."""
        kind = self._kind_of(obj)
        meta = obj["metadata"]
        ns = meta.get("namespace", namespace) if kind.namespaced else None
        path = kind.path(ns, meta["name"])
        answer: Obj = self.request(
            "PATCH",
            path,
            json.dumps(obj).encode(),
            content_type="application/apply-patch+yaml",
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
        )
        return answer

    def apply_all(self, objects: Iterable[Mapping[str, Any]], namespace: str) -> None:
        for obj in objects:
            self.apply(obj, namespace)

    def read(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            found: Obj = self.get(self.kind(api_version, kind).path(namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return found

    def list(self, api_version: str, kind: str, namespace: str | None = None, **query: str) -> list[Obj]:
        items: list[Obj] = self.get(self.kind(api_version, kind).path(namespace), **query)["items"]
        return items

    def create(self, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        kind = self._kind_of(obj)
        ns = obj["metadata"].get("namespace", namespace) if kind.namespaced else None
        created: Obj = self.request("POST", kind.path(ns), dict(obj))
        return created

    def replace(self, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        """Create the object, or update it (PUT, with the stored resourceVersion) where it exists:
        the writes the plugin itself makes (it is granted create and update, not patch)."""
        kind = self._kind_of(obj)
        meta = obj["metadata"]
        ns = meta.get("namespace", namespace) if kind.namespaced else None
        stored = self.read(obj["apiVersion"], obj["kind"], meta["name"], ns)
        if stored is None:
            return self.create(obj, ns)
        body = {**obj, "metadata": {**meta, "resourceVersion": stored["metadata"]["resourceVersion"]}}
        updated: Obj = self.request("PUT", kind.path(ns, meta["name"]), body)
        return updated

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, **query: str
    ) -> None:
        try:
            self.request("DELETE", self.kind(api_version, kind).path(namespace, name), query=query or None)
        except ApiError as error:
            if error.status != 404:
                raise
