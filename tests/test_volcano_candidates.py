"""Volcano's candidate rules as a pure function: which pod an Allocate of n chips is for."""

from __future__ import annotations

from typing import Any

from volcano_harness import RESOURCE, volcano_pod

from ascend_plugin.faces.volcano.chooser import MAX_REASONS, select
from ascend_plugin.faces.volcano.pods import CONSUMED, Pod, parse_pod


def pod(name: str, chips: list[int] | None, predicate_time: Any, **extra: Any) -> Pod:
    obj = volcano_pod(name, chips, predicate_time, **extra)
    obj["metadata"]["uid"] = f"uid-{name}"
    return parse_pod(obj)


def test_the_smallest_predicate_time_wins_whatever_the_listing_order() -> None:
    pods = [pod("c", [4, 5], 30), pod("a", [0, 1], 10), pod("b", [2, 3], 20)]
    assert select(pods, RESOURCE, 2).pod == pods[1]
    assert select(reversed(pods), RESOURCE, 2).pod == pods[1]


def test_ties_go_to_the_first_pod_by_name() -> None:
    pods = [pod("zeta", [0], 5), pod("alpha", [1], 5)]
    chosen = select(pods, RESOURCE, 1).pod
    assert chosen is not None
    assert chosen.name == "alpha"


def test_predicate_time_is_an_unsigned_64_bit_number_or_counts_as_consumed() -> None:
    assert pod("p", [0], "18446744073709551614").predicate_time == CONSUMED - 1
    for bad in (None, "", "-1", "1.5", "0x10", "18446744073709551616", "9" * 30):
        assert pod("p", [0], bad).predicate_time == CONSUMED, bad


def test_each_rule_names_why_a_pod_was_passed_over() -> None:
    deleting = volcano_pod("deleting", [0], 1)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    refused = volcano_pod("refused", [0], 1, phase="Failed")
    refused["status"]["reason"] = "UnexpectedAdmissionError"
    prestart = volcano_pod("prestart", [0], 1)
    prestart["status"]["containerStatuses"] = [
        {"name": "main", "state": {"waiting": {"message": "PreStartContainer check failed: x"}}}
    ]
    no_limits = volcano_pod("no-limits", [0], 1)
    no_limits["spec"]["containers"][0]["resources"] = {}
    pods = [parse_pod(obj) for obj in (deleting, refused, prestart, no_limits)]
    pods += [
        pod("failed", [0], 1, phase="Failed"),
        pod("two", [0, 1], 1),
        pod("served", [0], CONSUMED),
        pod("timeless", [0], None),
        pod("holding", [0], 1, extra_annotations={"huawei.com/AscendReal": "Ascend910-0"}),
        pod("listed", [0], 1),
        pod("local", [0], 1),
    ]
    selection = select(pods, RESOURCE, 1, consumed=lambda p: p.name == "local", holding={"default/listed"})
    assert selection.pod is None
    assert {miss.pod.split("/")[1]: miss.why for miss in selection.near_misses} == {
        "deleting": "being deleted",
        "refused": "phase Failed",
        "prestart": "a container is waiting with 'PreStartContainer check failed'",
        "no-limits": f"requests no {RESOURCE} in its limits",
        "failed": "phase Failed",
        "two": f"its {RESOURCE} annotation names 2 chip(s), the request is for 1",
        "served": "already served (predicate-time consumed)",
        "timeless": "no valid predicate-time (missing)",
        "holding": "already holds devices",
        "listed": "already holds devices",
        "local": "already served (predicate-time consumed)",
    }


def test_a_pending_pod_refused_at_admission_is_passed_over_too() -> None:
    refused = volcano_pod("refused", [0], 1)
    refused["status"]["reason"] = "UnexpectedAdmissionError"
    selection = select([parse_pod(refused)], RESOURCE, 1)
    assert selection.near_misses[0].why == "its admission failed (UnexpectedAdmissionError)"


def test_pods_without_the_resource_are_not_near_misses() -> None:
    other = volcano_pod("cpu-only", None, None, request=0)
    other["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    selection = select([parse_pod(other)], RESOURCE, 1)
    assert selection.near_misses == ()
    assert selection.describe_misses() == "no pod on this node asks for it or carries its annotation"


def test_near_misses_are_grouped_by_reason_with_a_few_pods_each_and_counted() -> None:
    pods = [pod(f"p{index:02d}", [0, 1], index) for index in range(13)]
    pods.append(pod("served", [0], "18446744073709551615"))
    described = select(pods, RESOURCE, 1).describe_misses()
    assert described == (
        "14 pod(s): default/p00, default/p01, default/p02 and 10 more: its huawei.com/Ascend910 annotation "
        "names 2 chip(s), the request is for 1; default/served: already served (predicate-time consumed)"
    )


def test_beyond_the_commonest_reasons_the_pods_are_only_counted() -> None:
    pods = [pod(f"p{chips}", list(range(chips)), 1) for chips in range(2, 2 + MAX_REASONS + 2)]
    described = select(pods, RESOURCE, 1).describe_misses()
    assert described.count("annotation names") == MAX_REASONS
    assert described.endswith("; and 2 more for 2 other reason(s)")
