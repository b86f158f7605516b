"""The rules that hold whatever the topology, over random nodes, free sets, must-include lists and sizes."""

from __future__ import annotations

import collections
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from placement_nodes import Node, chip_facts

from backends.topology import TopologyUnit

# (chip name, family, chips per card); 0 chips per card: random card ids (one chip or several per card).
LAYOUTS = [
    ("910A", "910", 1),
    ("910ProB", "910", 1),
    ("310", "310", 4),
    ("310", "310", 0),
    ("310P3", "310P", 2),
    ("310P3", "310P", 0),
    ("Ascend910", "910", 2),
    ("910B3", "910", 1),
    ("A2G2", "910", 1),
    ("310B1", "310B", 1),
]

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


# No server mixes these, but nothing in the types forbids it: rings, meshes and modules on one node.
MIXED_910 = st.sampled_from(["910A", "910B3", "Ascend910"])


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    chip_name, family, per_card = draw(st.sampled_from([*LAYOUTS, ("mixed", "910", 0)]))
    phys = sorted(draw(st.sets(st.integers(0, 15), min_size=1, max_size=16)))
    chips = [
        chip_facts(
            phy,
            phy // per_card if per_card else draw(st.integers(0, 5)),
            draw(MIXED_910) if chip_name == "mixed" else chip_name,
            family,
        )
        for phy in phys
    ]
    numa_of = draw(
        st.sampled_from(
            [None, lambda phy: phy // 4, lambda phy: phy % 2, lambda phy: None if phy % 3 else -1]
        )
    )
    shares = draw(st.sampled_from([1, 1, 2, 3]))
    return Node.of(chips, numa_of, shares)


@dataclass(frozen=True)
class Request:
    available: list[str]
    must_include: list[str]
    size: int


UNKNOWN = st.sampled_from(["Ascend-99", "npu-0", "", "Ascend-1-9"])


@st.composite
def requests(draw: st.DrawFn, node: Node, sound: bool = False) -> Request:
    """A request for ``node``; ``sound`` ones have no must-include and a size within what is free."""
    free = draw(st.lists(st.sampled_from(node.all_ids), unique=True, min_size=1 if sound else 0))
    if sound:
        return Request(free, [], draw(st.integers(1, len(free))))
    available = draw(st.permutations([*free, *draw(st.lists(UNKNOWN, max_size=2))]))
    must = draw(st.lists(st.sampled_from([*node.all_ids, "Ascend-99"]), max_size=4))
    return Request(available, must, draw(st.integers(-1, 20)))


def _answer(node: Node, request: Request) -> list[str]:
    return node.topology.preferred(request.available, request.must_include, request.size)


@PROPERTY_SETTINGS
@given(st.data())
def test_every_answer_is_valid(data: st.DataObject) -> None:
    node = data.draw(nodes())
    request = data.draw(requests(node))
    chosen = _answer(node, request)
    available = set(request.available) & set(node.all_ids)
    must = set(request.must_include) & available
    assert len(chosen) == len(set(chosen)), "no duplicates"
    assert set(chosen) <= available, "only available IDs"
    assert must <= set(chosen), "every must-include ID"
    assert len(chosen) == max(len(must), min(request.size, len(available)))


@PROPERTY_SETTINGS
@given(st.data())
def test_the_same_request_gets_the_same_answer_whatever_its_order(data: st.DataObject) -> None:
    node = data.draw(nodes())
    request = data.draw(requests(node))
    chosen = _answer(node, request)
    assert _answer(node, request) == chosen
    shuffled = Request(
        data.draw(st.permutations(request.available + request.available[:2])),
        data.draw(st.permutations(request.must_include)),
        request.size,
    )
    assert _answer(node, shuffled) == chosen


def _fewest_units(frees: list[int], size: int) -> int:
    """How few units can hold ``size`` devices: the largest free counts first."""
    total = 0
    for count, free in enumerate(sorted(frees, reverse=True), start=1):
        total += free
        if total >= size:
            return count
    raise AssertionError("the request exceeds the free devices")


@PROPERTY_SETTINGS
@given(st.data())
def test_a_sound_request_uses_the_fewest_units_it_can(data: st.DataObject) -> None:
    node = data.draw(nodes())
    request = data.draw(requests(node, sound=True))
    chosen = _answer(node, request)
    frees: dict[TopologyUnit, int] = {}
    for device_id in request.available:
        frees[node.unit(device_id)] = frees.get(node.unit(device_id), 0) + 1
    used = {node.unit(device_id) for device_id in chosen}
    assert len(used) == _fewest_units(list(frees.values()), request.size)
    if any(free >= request.size for free in frees.values()):
        assert len(used) == 1


@PROPERTY_SETTINGS
@given(st.data())
def test_a_sound_request_stays_on_one_numa_node_of_its_unit_when_one_can_hold_it(data: st.DataObject) -> None:
    node = data.draw(nodes())
    request = data.draw(requests(node, sound=True))
    chosen = _answer(node, request)
    (unit, *others) = {node.unit(device_id) for device_id in chosen}
    numa = {place.id: place.numa_node for place in node.places}
    in_unit = [device_id for device_id in request.available if node.unit(device_id) == unit]
    per_numa = collections.Counter(numa[device_id] for device_id in in_unit)
    known = all(numa_node is not None and numa_node >= 0 for numa_node in per_numa)
    if not others and known and max(per_numa.values()) >= request.size:
        assert len({numa[device_id] for device_id in chosen}) == 1
