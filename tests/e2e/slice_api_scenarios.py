"""What the plugin's ResourceSlice controller relies on besides admission, on the real API server.

Dry runs (answered as a create would be, nothing stored), names from ``generateName``, the
generation, immutable fields, field selectors, the kubelet's delete of a node's slices as a watch
sees it, delete preconditions, and a refusal for want of a permission.
"""

from __future__ import annotations

import copy
import re
import uuid

from api import ApiError, Obj
from slice_targets import SLICES, Gates, Release, Target
from slice_writes import (
    DRIVER,
    NEWER,
    NODE,
    Json,
    Scenario,
    as_gates_keep,
    create,
    created,
    fresh,
    refusal,
    refused,
    shown,
    slice_,
    update,
    updated,
)

GENERATED = "GENERATED"  # a name the server made from generateName
_SUFFIX = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")  # what the server appends to a generateName
GROUP = "resource.k8s.io"
TAINTED = {"name": "npu-0", "taints": [{"key": "npu.huawei.com/unhealthy", "effect": "NoSchedule"}]}


def dry_runs() -> list[Scenario]:
    """A dry run answers what would be stored (as a real create would drop and default), stores nothing."""

    def run(target: Target) -> Json:
        node = fresh("dry-run")
        body = slice_([TAINTED], node=node)
        api = target.api()
        selector = f"spec.nodeName={node}"
        version = api.get(SLICES, fieldSelector=selector)["metadata"]["resourceVersion"]
        answer = api.request("POST", SLICES, body, query={"dryRun": "All"})
        return {
            "answer": {
                "stored": shown(
                    {**answer["spec"], "nodeName": NODE, "pool": body["spec"]["pool"] | {"name": NODE}}
                )
            },
            "name": _generated(answer["metadata"]["name"], body),
            "stored after": len(api.get(SLICES, fieldSelector=selector)["items"]),
            "events": api.watch(SLICES, 1, fieldSelector=selector, resourceVersion=version),
        }

    def expected(release: Release) -> Json:
        answer = as_gates_keep(slice_([TAINTED]), Gates.DEFAULT, release)
        return {"answer": answer, "name": GENERATED, "stored after": 0, "events": []}

    invalid = slice_([{"name": "NPU"}])
    return [
        Scenario("a dry run stores nothing", run, expected),
        Scenario(
            "a dry run of an invalid slice is refused",
            lambda target: create(target, invalid, dry_run=True),
            lambda r: refused("spec.devices[0].name"),
            stand_in=False,
        ),
    ]


def _generated(name: str, body: Obj) -> str:
    """GENERATED for a name the server made from the body's generateName; else the name."""
    prefix: str = body["metadata"]["generateName"]
    return GENERATED if name.startswith(prefix) and _SUFFIX.fullmatch(name[len(prefix) :]) else name


def generated(target: Target) -> Json:
    body = slice_([{"name": "npu-0"}])
    stored = created(target, body)
    metadata = stored["metadata"]
    return {
        "name": _generated(metadata["name"], body),
        "generation": metadata["generation"],
        "uid": str(uuid.UUID(metadata["uid"])) == metadata["uid"],
        "kind": [stored["apiVersion"], stored["kind"]],
    }


def generations(target: Target) -> Json:
    """The generation after a create, an update without change, one with a change, and one whose
    change the server drops (counted all the same: the spec is compared as sent)."""
    stored = created(target, slice_([{"name": "npu-0"}]))
    same = updated(target, stored)
    same["spec"]["devices"].append({"name": "npu-1"})
    changed = updated(target, same)
    changed["spec"]["devices"][0]["taints"] = TAINTED["taints"]
    dropped = updated(target, changed, Gates.OFF)
    seen = [stored, same, changed, dropped]
    return {
        "generations": [answer["metadata"]["generation"] for answer in seen],
        "last stored": [d["name"] for d in dropped["spec"]["devices"] if "taints" not in d],
    }


def immutable(target: Target) -> Json:
    stored = created(target, slice_([{"name": "npu-0"}]))
    answers = {}
    for field, where, value in (
        ("driver", (), "gpu.example.com"),
        ("nodeName", (), "node-2"),
        ("name", ("pool",), "node-2"),
    ):
        changed = copy.deepcopy(stored)
        spec = changed["spec"]
        for step in where:
            spec = spec[step]
        spec[field] = value
        answers[".".join((*where, field))] = update(target, changed)
    return answers


def selectors(target: Target) -> Json:
    node, other = fresh("selector-1"), fresh("selector-2")
    labels = {
        (DRIVER, node): "ours on 1",
        ("gpu.example.com", node): "theirs on 1",
        (DRIVER, other): "ours on 2",
    }
    for driver, on in labels:
        created(target, slice_([{"name": "npu-0"}], driver=driver, node=on))
    api = target.api()
    answers: dict[str, Json] = {}
    for label, selector in (
        ("driver and node", f"spec.driver={DRIVER},spec.nodeName={node}"),
        ("another driver", f"spec.driver!={DRIVER},spec.nodeName={node}"),
        ("pool", f"spec.pool.name={other}"),
        ("a field without a selector", "spec.devices=npu-0"),
    ):
        try:
            items = api.get(SLICES, fieldSelector=selector)["items"]
            answers[label] = sorted(labels[s["spec"]["driver"], s["spec"]["nodeName"]] for s in items)
        except ApiError as error:
            answers[label] = refusal(error)
    return answers


def wiped(target: Target) -> Json:
    """The kubelet deletes a node's slices in one call; a watch sees each go."""
    node, other = fresh("wiped"), fresh("kept")
    names = [created(target, slice_([{"name": f"npu-{n}"}], node=node))["metadata"]["name"] for n in range(2)]
    created(target, slice_([{"name": "npu-0"}], node=other))
    api = target.api()
    selector = f"spec.nodeName={node}"
    version = api.get(SLICES, fieldSelector=selector)["metadata"]["resourceVersion"]
    api.request("DELETE", SLICES, query={"fieldSelector": selector})
    events = api.watch(SLICES, 2, fieldSelector=selector, resourceVersion=version)
    return {
        "events": sorted([e["type"], names.index(e["object"]["metadata"]["name"])] for e in events),
        "left": len(api.get(SLICES, fieldSelector=f"spec.nodeName={other}")["items"]),
    }


def preconditions(target: Target) -> Json:
    """A delete with the UID and resourceVersion seen: refused once the slice changed."""
    node = fresh("preconditions")
    stored = created(target, slice_([{"name": "npu-0"}], node=node))
    stored["spec"]["devices"].append({"name": "npu-1"})
    changed = updated(target, copy.deepcopy(stored))
    metadata = stored["metadata"]
    api, path = target.api(), f"{SLICES}/{metadata['name']}"
    words = {metadata["name"]: "NAME", metadata["resourceVersion"]: "SEEN"}
    words[changed["metadata"]["resourceVersion"]] = "STORED"
    answers: dict[str, Json] = {}
    for seen, label in ((stored, "stale"), (changed, "current")):
        options = {"preconditions": {k: seen["metadata"][k] for k in ("uid", "resourceVersion")}}
        try:
            api.request("DELETE", path, options)
            answers[label] = "deleted"
        except ApiError as error:
            answers[label] = {**refusal(error), "message": _replaced(error.message, words)}
    answers["left"] = len(api.get(SLICES, fieldSelector=f"spec.nodeName={node}")["items"])
    return answers


def forbidden(target: Target) -> Json:
    with target.without_permission() as api:
        try:
            api.request("POST", SLICES, slice_([{"name": "npu-0"}]))
        except ApiError as error:
            return {**refusal(error), "message": re.sub(r'User "[^"]*"', 'User "USER"', error.message)}
    return "created"


def _replaced(text: str, words: dict[str, str]) -> str:
    for word, replacement in words.items():
        text = text.replace(word, replacement)
    return text


API_SCENARIOS: list[Scenario] = [
    *dry_runs(),
    Scenario(
        "created with generateName",
        generated,
        lambda r: {
            "name": GENERATED,
            "generation": 1,
            "uid": True,
            "kind": [f"{GROUP}/v1", "ResourceSlice"],
        },
    ),
    Scenario(
        "the generation counts changes of the spec",
        generations,
        lambda r: {"generations": [1, 1, 2, 3], "last stored": ["npu-0", "npu-1"]},
    ),
    Scenario(
        "driver, node and pool name are immutable",
        immutable,
        lambda r: {
            "driver": refused("spec.driver"),
            "nodeName": refused("spec.nodeName"),
            "pool.name": refused("spec.pool.name"),
        },
        stand_in=False,
    ),
    Scenario(
        "field selectors",
        selectors,
        lambda r: {
            "driver and node": ["ours on 1"],
            "another driver": ["theirs on 1"],
            "pool": ["ours on 2"] if r >= NEWER else {"refused": 400, "reason": "BadRequest"},
            "a field without a selector": {"refused": 400, "reason": "BadRequest"},
        },
    ),
    Scenario(
        "a node's slices deleted at once",
        wiped,
        lambda r: {"events": [["DELETED", 0], ["DELETED", 1]], "left": 1},
    ),
    Scenario(
        "delete preconditions",
        preconditions,
        lambda r: {
            "stale": {
                "refused": 409,
                "reason": "Conflict",
                "message": f'Operation cannot be fulfilled on ResourceSlice.{GROUP} "NAME": the '
                "ResourceVersion in the precondition (SEEN) does not match the ResourceVersion in record "
                "(STORED). The object might have been modified",
            },
            "current": "deleted",
            "left": 0,
        },
    ),
    Scenario(
        "a user without the permission",
        forbidden,
        lambda r: {
            "refused": 403,
            "reason": "Forbidden",
            "message": f'resourceslices.{GROUP} is forbidden: User "USER" cannot create resource '
            f'"resourceslices" in API group "{GROUP}" at the cluster scope',
        },
    ),
]
