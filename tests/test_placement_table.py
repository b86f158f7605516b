"""The placement rules are data: a well-formed table per unit kind, read by one generic algorithm."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from placement_nodes import first_gen_910

from ascend_plugin.offers.placement import PLACEMENT_RULES, NodeTopology, Spread, UnitRules
from backends.topology import UnitKind


def test_every_unit_kind_has_rules() -> None:
    assert set(PLACEMENT_RULES) == set(UnitKind)


@pytest.mark.parametrize("kind", list(UnitKind))
def test_every_order_ranks_each_free_count_that_can_hold_the_request_once(kind: UnitKind) -> None:
    for size, rows in PLACEMENT_RULES[kind].fit_order.items():
        for request, order in rows.items():
            assert sorted(order) == list(range(request, size + 1)), (kind, size, request)


def test_a_free_count_the_table_does_not_rank_falls_back_to_best_fit() -> None:
    rules = PLACEMENT_RULES[UnitKind.RING]
    assert [rules.rank(4, 1, free) for free in (1, 2, 3, 4)] == [0, 2, 1, 3]
    # A ring of 3 (a chip missing): no row, best fit.
    assert [rules.rank(3, 1, free) for free in (1, 2, 3)] == [0, 1, 2]


def test_another_table_changes_the_answer_without_code() -> None:
    # A table that spreads single chips over the emptiest ring instead.
    spreading = MappingProxyType(
        {
            **PLACEMENT_RULES,
            UnitKind.RING: UnitRules(Spread.CONSOLIDATE, MappingProxyType({4: {1: (4, 3, 2, 1)}})),
        }
    )
    node = first_gen_910()
    free = [*node.ids([3]), *node.ids(range(4, 8))]
    assert node.topology.preferred(free, [], 1) == ["Ascend-3"]
    assert NodeTopology(node.places, spreading).preferred(free, [], 1) == ["Ascend-4"]
