"""A rendered ValidatingAdmissionPolicy applied to a request, as the API server's admission applies it.

The policy's CEL (match conditions, variables, validations) is evaluated with a
CEL implementation against the request's attributes, the way the API server
does: resource rules and match conditions decide whether the policy applies;
variables are computed in order; every validation must hold, or the request is
refused with that validation's message. What a real API server adds (the token's
claims, the stored object) is what a test gives here; the lead's end-to-end
suite runs the same policy on a real server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """One write as admission sees it: who asks, the operation, the resource, the object (old and new)."""

    username: str
    operation: str  # CREATE, UPDATE, DELETE
    group: str
    resource: str
    object: Json | None = None
    old_object: Json | None = None
    extra: dict[str, list[str]] = field(default_factory=dict)  # the token's claims: node name, pod name
    sub_resource: str = ""  # "status": a write through the object's status subresource

    def attributes(self) -> Json:
        return {
            "operation": self.operation,
            "userInfo": {"username": self.username, "extra": self.extra},
            "resource": {"group": self.group, "resource": self.resource},
            "subResource": self.sub_resource,
        }


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(expression)).evaluate(activation)


def _matches(policy: Json, request: Request) -> bool:
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    return any(
        request.group in rule["apiGroups"]
        and (f"{request.resource}/{request.sub_resource}" if request.sub_resource else request.resource)
        in rule["resources"]
        and request.operation in rule["operations"]
        for rule in rules
    )


def admit(policy: Json, request: Request) -> str | None:
    """None when the policy lets ``request`` through, else the message it refuses it with."""
    import celpy

    if not _matches(policy, request):
        return None
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(request.attributes()),
        "object": celpy.json_to_cel(request.object),
        "oldObject": celpy.json_to_cel(request.old_object),
    }
    spec = policy["spec"]
    if not all(bool(_evaluate(c["expression"], activation)) for c in spec.get("matchConditions", ())):
        return None
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", ()):
        activation["variables"] = (
            celpy.json_to_cel({}) if not variables else celpy.celtypes.MapType(variables)
        )
        variables[celpy.celtypes.StringType(variable["name"])] = _evaluate(variable["expression"], activation)
    activation["variables"] = celpy.celtypes.MapType(variables)
    for validation in spec["validations"]:
        if not bool(_evaluate(validation["expression"], activation)):
            return str(_evaluate(validation["messageExpression"], activation))
    return None
