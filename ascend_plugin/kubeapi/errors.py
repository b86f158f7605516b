"""What can go wrong talking to the API server, as exception types the parts act on: a conflict is retried
with a fresh resourceVersion, 410 lists again, a 404 may create, the rest waits with backoff. A 403 names
the ClusterRole rule that is missing."""

from __future__ import annotations

RBAC_DOC = "docs/kubernetes.md#rbac"


class KubeError(Exception):
    """Root of the API errors: no client configuration, a server that does not answer, an error status
    (a subclass per status a caller reacts to differently); the part that saw it retries with backoff."""


class KubeConfigError(KubeError):
    """No usable client configuration (not in a pod and no kubeconfig, or a broken kubeconfig)."""


class Unreachable(KubeError):
    """The API server did not answer: refused, reset, timed out, or a broken stream."""


class ApiError(KubeError):
    def __init__(self, status: int, verb: str, resource: str, name: str, message: str) -> None:
        self.status = status
        self.verb = verb
        self.resource = resource
        self.name = name
        self.message = message
        super().__init__(self._describe())

    @property
    def target(self) -> str:
        """What the request was about, e.g. ``configmaps kube-system/x`` or ``nodes``."""
        return f"{self.resource} {self.name}" if self.name else self.resource

    def _describe(self) -> str:
        return f"{self.verb} {self.target}: HTTP {self.status}: {self.message}"


class Unauthorized(ApiError):
    """401: the credentials were not accepted (expired token, wrong kubeconfig user)."""


class Forbidden(ApiError):
    """403: the plugin's ServiceAccount lacks a permission; the message names the rule to add."""

    def _describe(self) -> str:
        group, _, plural = self.resource.rpartition("/")
        return (
            f"the API server refused to {self.verb} {self.target} (403 Forbidden: {self.message}). "
            f"Add this rule to the plugin's ClusterRole: "
            f'{{apiGroups: ["{group}"], resources: ["{plural}"], verbs: ["{self.verb}"]}} (see {RBAC_DOC})'
        )


class NotFound(ApiError):
    """404: the object (or, for a namespaced one, its namespace) does not exist."""


class Conflict(ApiError):
    """409: a stale resourceVersion on update, or the object already exists on create."""


class Gone(ApiError):
    """410: the resourceVersion a watch or list started from is too old; list again."""


class ServerError(ApiError):
    """5xx or 429: the API server is unwell or busy."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    429: ServerError,
}


def api_error(status: int, verb: str, resource: str, name: str, message: str) -> ApiError:
    """The exception type for an HTTP error status."""
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return kind(status, verb, resource, name, message)
