"""Test pods on the real cluster: made, waited for, read back.

A test pod runs the busybox test image and prints what its container was given (its /dev entries,
its environment) before it sleeps, so a test reads the device handover from the pod's log as the
API server serves it from the real kubelet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api import Api, ApiError
from images import TEST_IMAGE
from node_plugin import wait_for

NAMESPACE = "default"
REPORT = "echo '--- dev'; ls -1 /dev; echo '--- env'; env; echo '--- end'; exec sleep 86400"


def pod(
    name: str,
    limits: Mapping[str, str] | None = None,
    *,
    claims: list[dict[str, Any]] | None = None,
    claim_templates: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod asking for ``limits`` (extended resources) or for DRA claims from templates."""
    container: dict[str, Any] = {
        "name": "work",
        "image": TEST_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", REPORT],
    }
    if limits:
        container["resources"] = {"limits": dict(limits)}
    spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": 1,  # 0 would delete the pod before the kubelet stopped it
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
    }
    if claim_templates:
        spec["resourceClaims"] = [
            {"name": claim, "resourceClaimTemplateName": template}
            for claim, template in claim_templates.items()
        ]
        container.setdefault("resources", {})["claims"] = [{"name": claim} for claim in claim_templates]
    if claims:
        spec["resourceClaims"] = claims
        container.setdefault("resources", {})["claims"] = [{"name": claim["name"]} for claim in claims]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


@dataclass(frozen=True)
class Seen:
    """What a test pod's container printed about itself."""

    dev: tuple[str, ...]
    env: dict[str, str]

    def devices(self, prefix: str = "davinci") -> list[str]:
        return sorted(name for name in self.dev if name.startswith(prefix))


def phase(api: Api, name: str) -> str:
    found = api.read("v1", "Pod", name, NAMESPACE)
    return "" if found is None else str(found["status"].get("phase", ""))


def why_not_running(api: Api, name: str) -> str:
    """The pod's conditions and container states, to explain a wait that ended."""
    found = api.read("v1", "Pod", name, NAMESPACE)
    if found is None:
        return "no such pod"
    status = found.get("status", {})
    said = {key: status.get(key) for key in ("phase", "reason", "message", "conditions", "containerStatuses")}
    return ", ".join(f"{key} {value}" for key, value in said.items() if value)


def running(api: Api, name: str, within: float = 300.0) -> dict[str, Any]:
    """The pod once Running; fails with its state if it fails or does not start within ``within`` s.

    Generous: a pod whose claim the Node authorizer has not linked to the node yet ("no relationship
    found") waits out the kubelet's backoff, a minute and a half at times.
    """

    def look() -> dict[str, Any] | None:
        found = api.read("v1", "Pod", name, NAMESPACE)
        if found is None:
            return None
        current = found["status"].get("phase")
        if current in ("Failed", "Succeeded"):
            raise AssertionError(f"pod {name} ended: {why_not_running(api, name)}")
        return found if current == "Running" else None

    try:
        found: dict[str, Any] = wait_for(look, f"pod {name} running", within)
    except TimeoutError as late:
        raise AssertionError(f"{late}: {why_not_running(api, name)}") from None
    return found


def seen(api: Api, name: str, within: float = 60.0) -> Seen:
    """What the pod's container printed (its log, through the API server and the kubelet)."""

    def log() -> str | None:
        text = str(api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/log"))
        return text if "--- end" in text else None

    text: str = wait_for(log, f"the log of pod {name}", within)
    dev_part = text.split("--- dev\n", 1)[1].split("--- env\n", 1)[0]
    env_part = text.split("--- env\n", 1)[1].split("--- end", 1)[0]
    env = dict(line.split("=", 1) for line in env_part.splitlines() if "=" in line)
    return Seen(tuple(dev_part.split()), env)


def run_pod(api: Api, name: str, limits: Mapping[str, str] | None = None, **claims: Any) -> Seen:
    """Create the pod, wait until it runs, and read what its container was given."""
    api.create(pod(name, limits, **claims))
    running(api, name)
    return seen(api, name)


def delete(api: Api, name: str, wait: bool = True) -> None:
    """Delete the pod as kubectl does: the kubelet stops it (and unprepares its claims) before it is gone."""
    api.delete("v1", "Pod", name, NAMESPACE)
    if wait:
        wait_for(lambda: api.read("v1", "Pod", name, NAMESPACE) is None, f"pod {name} gone")


def pending_reason(api: Api, name: str) -> str:
    """The scheduler's message for a pod it could not place ('' while none)."""
    found = api.read("v1", "Pod", name, NAMESPACE)
    for condition in (found or {}).get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return ""


def node_resources(api: Api, node: str, resource: str) -> tuple[int, int]:
    """(capacity, allocatable) of ``resource`` on ``node`` (0 where it is not listed)."""
    status = api.read("v1", "Node", node)["status"]  # type: ignore[index]
    return int(status.get("capacity", {}).get(resource, 0)), int(
        status.get("allocatable", {}).get(resource, 0)
    )


__all__ = ["ApiError"]
