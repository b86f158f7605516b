"""Requests the kubelet should never send still get a valid answer and one warning line, never an error."""

from __future__ import annotations

import logging

import pytest
from log_records import fields
from placement_nodes import first_gen_910

from ascend_plugin.logs import JsonFormatter
from ascend_plugin.offers.placement import DevicePlace, NodeTopology
from backends.topology import TopologyUnit, UnitKind

NODE = first_gen_910()
LOGGER = "ascend_plugin.offers.placement"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.WARNING]


def _ask(available: list[str], must: list[str], size: int) -> list[str]:
    return NODE.topology.preferred(available, must, size)


def test_a_sound_request_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert _ask(NODE.all_ids, ["Ascend-5"], 2) == ["Ascend-4", "Ascend-5"]
    assert _warnings(caplog) == []


def test_unknown_ids_are_ignored_with_one_warning_naming_them(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        chosen = _ask(["Ascend-9", *NODE.ids([4, 5, 6]), "npu-x"], ["Ascend-42", "Ascend-6"], 2)
    assert chosen == ["Ascend-4", "Ascend-6"]
    (line,) = _warnings(caplog)
    assert fields(line, "devices", "unknown") == {"devices": ["Ascend-9", "npu-x", "Ascend-42"], "unknown": 3}


def test_must_include_ids_that_are_not_available_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        chosen = _ask(NODE.ids([4, 5, 6]), ["Ascend-0"], 2)
    assert chosen == ["Ascend-4", "Ascend-5"]
    (line,) = _warnings(caplog)
    assert fields(line, "devices", "unavailable") == {"devices": ["Ascend-0"], "unavailable": 1}


def test_more_must_include_than_the_size_answers_them_all(caplog: pytest.LogCaptureFixture) -> None:
    must = NODE.ids([6, 1, 3])
    with caplog.at_level(logging.WARNING, LOGGER):
        chosen = _ask(NODE.all_ids, must, 2)
    assert chosen == NODE.ids([1, 3, 6])
    (line,) = _warnings(caplog)
    assert fields(line, "must_include", "allocation_size") == {"must_include": 3, "allocation_size": 2}


def test_a_size_above_what_is_available_answers_every_available_id(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        chosen = _ask(NODE.ids([7, 2, 3]), [], 4)
    assert chosen == NODE.ids([2, 3, 7])
    (line,) = _warnings(caplog)
    assert fields(line, "available", "allocation_size") == {"available": 3, "allocation_size": 4}


@pytest.mark.parametrize("size", [0, -1])
def test_a_size_below_one_answers_only_the_must_include_ids(
    size: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        assert _ask(NODE.all_ids, [], size) == []
        assert _ask(NODE.all_ids, ["Ascend-3"], size) == ["Ascend-3"]
    assert [fields(line, "allocation_size") for line in _warnings(caplog)] == [{"allocation_size": size}] * 2


def test_nothing_available_answers_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        assert _ask([], [], 2) == []
    assert len(_warnings(caplog)) == 1


def test_repeated_and_reordered_ids_change_nothing() -> None:
    plain = _ask(NODE.ids([1, 2, 3, 5, 6]), ["Ascend-6"], 2)
    assert plain == ["Ascend-5", "Ascend-6"]
    assert _ask(NODE.ids([6, 5, 3, 2, 1, 1, 6]), ["Ascend-6", "Ascend-6"], 2) == plain


def test_offering_one_id_twice_is_refused_naming_it() -> None:
    unit = TopologyUnit(UnitKind.CARD, 0, 2)
    with pytest.raises(ValueError, match=r"'Ascend-0' is offered twice"):
        NodeTopology([DevicePlace("Ascend-0", 0, unit), DevicePlace("Ascend-0", 1, unit)])


def test_a_flood_of_unknown_ids_is_named_in_a_bounded_line(caplog: pytest.LogCaptureFixture) -> None:
    flood = [f"bogus-{n}" for n in range(5000)]
    with caplog.at_level(logging.WARNING, LOGGER):
        assert _ask([*flood, "Ascend-2"], [], 1) == ["Ascend-2"]
    (line,) = _warnings(caplog)
    assert fields(line, "devices", "unknown") == {"devices": flood[:10], "unknown": 5000}
    assert len(JsonFormatter().format(line)) < 600  # the line, fields and all, names ten and counts the rest
