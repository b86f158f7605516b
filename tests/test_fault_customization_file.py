"""faultCustomization.json: Huawei's field names, ranges and defaults; what is ignored, and why."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from ascend_plugin.fault_policy.config import builtin_customization
from ascend_plugin.fault_policy.customization import (
    NEVER,
    DurationRule,
    FaultCustomization,
    FrequencyRule,
    GraceTolerance,
    parse_customization,
)
from ascend_plugin.fault_policy.documents import ConfigNote, FaultConfigError
from ascend_plugin.fault_policy.faults import FaultLevel

L = FaultLevel
SOURCE = "faultCustomization.json of the test"
CODE = 0x80E18005


def parsed(document: dict[str, Any]) -> tuple[FaultCustomization, list[ConfigNote]]:
    return parse_customization(json.dumps(document), SOURCE)


def frequency(**fields: Any) -> dict[str, Any]:
    return {
        "EventId": ["80E18005"],
        "TimeWindow": 86400,
        "Times": 3,
        "FaultHandling": "ManuallySeparateNPU",
        **fields,
    }


def duration(**fields: Any) -> dict[str, Any]:
    return {
        "EventId": ["81078603"],
        "FaultTimeout": 20,
        "RecoverTimeout": 60,
        "FaultHandling": "PreSeparateNPU",
        **fields,
    }


def test_the_built_in_file_is_huaweis() -> None:
    shipped = json.loads(
        resources.files("ascend_plugin").joinpath("data/faultCustomization.json").read_text()
    )
    assert [len(entry["EventId"]) for entry in shipped["FaultFrequency"]] == [41, 1, 1]
    assert parsed(shipped)[1] == []  # nothing in it is ignored
    builtin = builtin_customization()
    assert builtin.grace == GraceTolerance(30, 150, 15)
    assert len(builtin.frequency) == 43
    assert builtin.frequency[0x80E01801] == FrequencyRule(86400, 2, L.ManuallySeparateNPU, NEVER)
    assert builtin.frequency[CODE] == FrequencyRule(86400, 3, L.ManuallySeparateNPU, NEVER)
    assert builtin.frequency[0x81078603] == FrequencyRule(86400, 5, L.ManuallySeparateNPU, 172800)
    assert builtin.duration == {0x81078603: DurationRule(20, 60, L.PreSeparateNPU)}
    assert builtin.autofill_release_window == 172800
    assert not builtin.drops_accompanying_faults  # no FaultDuration for 80E01801


@pytest.mark.parametrize(
    ("field", "value", "low", "high", "default"),
    [
        ("WaitProcessReadCMTime", 4, 5, 90, 30),
        ("WaitProcessReadCMTime", 91, 5, 90, 30),
        ("WaitDeviceResetTime", 59, 60, 180, 150),
        ("WaitDeviceResetTime", 181, 60, 180, 150),
        ("WaitFaultSelfHealingTime", 0, 1, 30, 15),
        ("WaitFaultSelfHealingTime", 31, 1, 30, 15),
    ],
)
def test_a_grace_value_out_of_range_falls_back_to_its_default(
    field: str, value: int, low: int, high: int, default: int
) -> None:
    customization, notes = parsed({"GraceTolerance": {field: value}})
    assert getattr(customization.grace, field) == default
    assert [(note.entry, note.error) for note in notes] == [(f"GraceTolerance.{field}", True)]
    assert f"{value} is out of range {low}-{high}" in notes[0].message  # the value, and what is allowed


def test_grace_values_in_range_apply_and_missing_ones_take_their_defaults() -> None:
    customization, notes = parsed(
        {"GraceTolerance": {"WaitProcessReadCMTime": 5, "WaitDeviceResetTime": 180}}
    )
    assert customization.grace == GraceTolerance(5, 180, 15)
    assert notes == []


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (frequency(EventId=[]), "it has no EventId"),
        (frequency(TimeWindow=59), "TimeWindow 59 is out of range 60-864000"),
        (frequency(TimeWindow=864001), "TimeWindow 864001 is out of range 60-864000"),
        (frequency(Times=0), "Times 0 is out of range 1-100"),
        (frequency(Times=101), "Times 101 is out of range 1-100"),
        (frequency(ReleaseTimeWindow=59), "ReleaseTimeWindow 59 is out of range 60-4294967296"),
        (frequency(ReleaseTimeWindow=NEVER + 1), "ReleaseTimeWindow 4294967297 is out of range"),
        (frequency(FaultHandling="SeparateNPU"), "FaultHandling SeparateNPU needs a ReleaseTimeWindow"),
        (frequency(FaultHandling="Broken", ReleaseTimeWindow=60), "FaultHandling 'Broken' is not one of"),
        (
            frequency(FaultHandling="NormalNPU", ReleaseTimeWindow=60),
            "FaultHandling 'NormalNPU' is not one of",
        ),
    ],
)
def test_a_frequency_entry_out_of_range_is_ignored_with_a_note_naming_it(
    entry: dict[str, Any], why: str
) -> None:
    good = frequency(EventId=["80E18402"])
    customization, notes = parsed({"FaultFrequency": [good, entry]})
    assert set(customization.frequency) == {0x80E18402}
    assert len(notes) == 1
    assert notes[0].entry.startswith("FaultFrequency[1]")
    assert why in notes[0].message


def test_a_frequency_entry_names_its_codes() -> None:
    _, notes = parsed({"FaultFrequency": [frequency(Times=0)]})
    assert notes[0].entry == "FaultFrequency[0] (EventId 80E18005)"


def test_release_window_zero_or_missing_means_never() -> None:
    customization, _ = parsed({"FaultFrequency": [frequency(ReleaseTimeWindow=0)]})
    assert customization.frequency[CODE].release_window == NEVER
    assert not customization.frequency[CODE].releases
    customization, _ = parsed(
        {"FaultFrequency": [frequency(FaultHandling="SeparateNPU", ReleaseTimeWindow=60)]}
    )
    assert customization.frequency[CODE] == FrequencyRule(86400, 3, L.SeparateNPU, 60)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (duration(EventId=None), "it has no EventId"),
        (duration(FaultTimeout=-1), "FaultTimeout -1 is out of range 0-600"),
        (duration(FaultTimeout=601), "FaultTimeout 601 is out of range 0-600"),
        (duration(RecoverTimeout=86401), "RecoverTimeout 86401 is out of range 0-86400"),
        (duration(FaultHandling="ManuallySeparateNPU"), "FaultHandling 'ManuallySeparateNPU' is not one of"),
        (duration(FaultHandling=None), "FaultHandling '' is not one of"),
    ],
)
def test_a_duration_entry_out_of_range_is_ignored_with_a_note_naming_it(
    entry: dict[str, Any], why: str
) -> None:
    customization, notes = parsed({"FaultDuration": [entry]})
    assert customization.duration == {}
    assert [note.entry.split(" ")[0] for note in notes] == ["FaultDuration[0]"]
    assert why in notes[0].message


def test_zero_timeouts_are_in_range() -> None:
    customization, notes = parsed({"FaultDuration": [duration(FaultTimeout=0, RecoverTimeout=0)]})
    assert customization.duration[0x81078603] == DurationRule(0, 0, L.PreSeparateNPU)
    assert notes == []


def test_a_code_in_two_valid_entries_follows_the_first() -> None:
    customization, notes = parsed(
        {"FaultFrequency": [frequency(Times=0), frequency(Times=2), frequency(Times=4)]}
    )
    assert customization.frequency[CODE].times == 2  # the first *valid* entry
    assert [note.entry.split(" ")[0] for note in notes] == ["FaultFrequency[0]", "FaultFrequency[2]"]
    assert "80E18005 already has a FaultFrequency entry" in notes[1].message


def test_an_event_id_that_is_not_hex_is_skipped_and_the_rest_of_the_entry_applies() -> None:
    customization, notes = parsed({"FaultFrequency": [frequency(EventId=["80E18005", "x1"])]})
    assert set(customization.frequency) == {CODE}
    assert "EventId 'x1' is not a hex fault code" in notes[0].message


@pytest.mark.parametrize(
    ("rule", "handling", "kept"),
    [
        ("FaultDuration", "RestartNPU", L.NotHandleFault),
        ("FaultDuration", "SeparateNPU", L.SeparateNPU),
        ("FaultDuration", "SubHealthFault", L.SubHealthFault),
        ("FaultFrequency", "RestartBusiness", L.NotHandleFault),
        ("FaultFrequency", "ManuallySeparateNPU", L.ManuallySeparateNPU),
    ],
)
def test_a_network_code_takes_only_levels_with_a_network_meaning(
    rule: str, handling: str, kept: FaultLevel
) -> None:
    if rule == "FaultDuration":
        entry = duration(FaultHandling=handling)
    else:
        entry = frequency(EventId=["81078603"], FaultHandling=handling, ReleaseTimeWindow=600)
    customization, notes = parsed({rule: [entry]})
    rules = customization.duration if rule == "FaultDuration" else customization.frequency
    assert rules[0x81078603].handling is kept
    assert bool(notes) is (kept is not FaultLevel[handling])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            '{"FaultFrequency": [{"EventId": ["80E18005"], "Times": "3"}]}',
            r"Times must be a whole number, not \"3\"",
        ),
        (
            '{"FaultFrequency": [{"EventId": ["80E18005"], "Times": 2.5}]}',
            "Times must be a whole number, not 2.5",
        ),
        (
            '{"FaultFrequency": [{"EventId": ["80E18005"], "Times": true}]}',
            "must be a whole number, not true",
        ),
        ('{"FaultDuration": {"EventId": ["81078603"]}}', "FaultDuration must be an array"),
        ('{"GraceTolerance": []}', "GraceTolerance must be an object"),
        ('{"FaultDuration": [{"EventId": "81078603"}]}', "EventId must be an array"),
        ('{"FaultDuration": [{"FaultTimeout": 99999999999999999999}]}', "does not fit in a 64-bit integer"),
        ("{", "is not valid JSON"),
    ],
)
def test_a_value_of_the_wrong_type_refuses_the_whole_document(document: str, message: str) -> None:
    with pytest.raises(FaultConfigError, match=message):
        parse_customization(document, SOURCE)


def test_field_names_match_in_any_case_and_unknown_ones_are_noted() -> None:
    customization, notes = parsed({"faultfrequency": [{**frequency(), "timewindow": 600, "Window": 1}]})
    assert customization.frequency[CODE].time_window == 600
    assert [note.entry for note in notes] == ["FaultFrequency[0].Window"]


def test_hbm_accompanying_faults_drop_with_a_duration_entry_for_it() -> None:
    customization, _ = parsed(
        {"FaultDuration": [duration(EventId=["80E01801"], FaultHandling="SeparateNPU")]}
    )
    assert customization.drops_accompanying_faults


def test_the_autofill_window_is_the_longest_finite_release_window() -> None:
    customization, _ = parsed(
        {
            "FaultFrequency": [
                frequency(EventId=["1"], FaultHandling="SeparateNPU", ReleaseTimeWindow=600),
                frequency(EventId=["2"], FaultHandling="SeparateNPU", ReleaseTimeWindow=7200),
                frequency(EventId=["3"]),  # never
            ]
        }
    )
    assert customization.autofill_release_window == 7200
    assert parsed({"FaultFrequency": [frequency()]})[0].autofill_release_window is None
