"""faultCode.json: Huawei's lists as Huawei reads them, and the level they give a chip."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascend_plugin.fault_policy.config import builtin_codes
from ascend_plugin.fault_policy.documents import FaultConfigError
from ascend_plugin.fault_policy.fault_codes import CHIP_LISTS, FaultCodeLists, parse_fault_codes
from ascend_plugin.fault_policy.faults import LINK_DOWN, NETWORK_CODES, FaultLevel, parse_code

L = FaultLevel
# Wall-clock deadlines would fail under CPU pressure; the examples are cheap.
PROPERTIES = settings(max_examples=200, deadline=None)
SOURCE = "faultCode.json of the test"


def lists(document: dict[str, object]) -> FaultCodeLists:
    parsed, _ = parse_fault_codes(json.dumps(document), SOURCE)
    return parsed


def test_the_built_in_file_is_huaweis_with_its_entry_counts() -> None:
    shipped = json.loads(resources.files("ascend_plugin").joinpath("data/faultCode.json").read_text())
    # Huawei's master (mind-cluster 22bb3d98), component/ascend-device-plugin/build/faultCode.json.
    assert {key: len(codes) for key, codes in shipped.items()} == {
        "NotHandleFaultCodes": 132,
        "RestartRequestCodes": 33,
        "RestartBusinessCodes": 26,
        "FreeRestartNPUCodes": 23,
        "RestartNPUCodes": 162,
        "SeparateNPUCodes": 215,
        "PreSeparateNPUCodes": 200,
        "SubHealthFaultCodes": 13,
    }
    _, notes = parse_fault_codes(json.dumps(shipped), "built-in")
    assert notes == []  # nothing in it is skipped or moved
    builtin = builtin_codes()
    assert builtin.list_level(0x80E01801) is L.RestartBusiness  # HBM multi-bit
    assert builtin.list_level(0x40F84E00) is L.RestartNPU  # card drop
    assert builtin.list_level(0x8C2FA009) is L.NotHandleFault  # reset finished
    assert builtin.list_level(LINK_DOWN) is L.NotHandleFault
    assert builtin.network[L.NotHandleFault] >= {LINK_DOWN}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("80E01801", 0x80E01801),
        ("80e01801", 0x80E01801),
        ("110001024", 0x110001024),
        ("020001002", 0x20001002),
        ("0x80E01801", None),
        ("-1", None),
        (" 80E01801", None),
        ("80E0_1801", None),
        ("", None),
        ("zz", None),
        ("8" * 17, None),
    ],
)
def test_a_code_is_hex_digits_only(text: str, code: int | None) -> None:
    assert parse_code(text) == code


def test_bad_strings_are_skipped_with_a_note_and_the_rest_applies() -> None:
    parsed, notes = parse_fault_codes(
        json.dumps({"SeparateNPUCodes": ["80E18402", "0x80E01801", "nothex"]}), SOURCE
    )
    assert parsed.chip[L.SeparateNPU] == {0x80E18402}
    assert [(note.entry, note.source) for note in notes] == [("SeparateNPUCodes", SOURCE)] * 2
    assert "'0x80E01801' is not a hex fault code" in notes[0].message


def test_keys_match_in_any_case_and_unknown_keys_are_noted() -> None:
    parsed, notes = parse_fault_codes(
        json.dumps({"separatenpucodes": ["80E18402"], "SeperateNPUCodes": ["80E01801"]}), SOURCE
    )
    assert parsed.chip[L.SeparateNPU] == {0x80E18402}
    assert [note.entry for note in notes] == ["SeperateNPUCodes"]
    assert "unknown key 'SeperateNPUCodes' is ignored" in notes[0].message


def test_the_spelling_is_kept_for_output() -> None:
    parsed = lists({"SeparateNPUCodes": ["020001002", "80e18402"], "NotHandleFaultCodes": ["80E18402"]})
    # Huawei registers NotHandleFaultCodes first: its spelling of a code wins.
    assert parsed.spellings == {0x20001002: "020001002", 0x80E18402: "80e18402"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("", "is not valid JSON"),
        ('["80E01801"]', "must be a JSON object, not an array"),
        ('{"SeparateNPUCodes": "80E01801"}', "SeparateNPUCodes must be an array, not a string"),
        ('{"SeparateNPUCodes": [2162169857]}', r"SeparateNPUCodes\[0\] must be a string, not 2162169857"),
        ('{"SeparateNPUCodes": NaN}', "is not valid JSON"),
    ],
)
def test_a_document_go_cannot_decode_is_refused_whole(document: str, message: str) -> None:
    with pytest.raises(FaultConfigError, match=message):
        parse_fault_codes(document, SOURCE)


def test_null_lists_are_empty_as_in_go() -> None:
    assert lists({"SeparateNPUCodes": None}).chip[L.SeparateNPU] == frozenset()


# -- the chip's level ---------------------------------------------------------------------


def test_the_first_list_in_huaweis_order_that_holds_any_code_decides() -> None:
    document = {key: [f"A000000{index}"] for index, (key, _) in enumerate(CHIP_LISTS)}
    parsed = lists(document)
    every = [0xA0000000 + index for index in range(len(CHIP_LISTS))]
    assert parsed.chip_level(every, {}) is L.SeparateNPU
    for index, (_, level) in enumerate(CHIP_LISTS):
        assert parsed.chip_level(every[index:], {}) is level


def test_a_code_in_two_lists_counts_at_the_more_severe() -> None:
    parsed = lists({"NotHandleFaultCodes": ["A2301001"], "RestartBusinessCodes": ["A2301001"]})
    assert parsed.chip_level([0xA2301001], {}) is L.RestartBusiness
    assert parsed.list_level(0xA2301001) is L.RestartBusiness


@pytest.mark.parametrize(
    ("severity", "level"),
    [
        (0, L.NotHandleFault),
        (1, L.NotHandleFault),
        (2, L.SeparateNPU),
        (3, L.SeparateNPU),
        (None, L.SeparateNPU),
    ],
)
def test_an_unknown_code_goes_by_its_severity(severity: int | None, level: FaultLevel) -> None:
    assert builtin_codes().chip_level([0x12345678], {0x12345678: severity}) is level


def test_an_unknown_code_never_seen_with_a_severity_is_separate() -> None:
    assert builtin_codes().chip_level([0x12345678], {}) is L.SeparateNPU


def test_the_severity_rule_applies_only_when_no_code_is_listed() -> None:
    # Huawei's order: a listed code decides, even a NotHandle one beside a critical unknown.
    chip = [0x80E21007, 0x12345678]  # NotHandleFault, unknown
    assert builtin_codes().chip_level(chip, {0x12345678: 3}) is L.NotHandleFault


def test_network_codes_do_not_count_for_the_chip() -> None:
    assert builtin_codes().chip_level([LINK_DOWN], {}) is L.NormalNPU
    assert builtin_codes().network_level([LINK_DOWN]) is L.NotHandleFault


# -- network codes --------------------------------------------------------------------------


def test_network_codes_in_chip_lists_are_copied_to_the_network_lists() -> None:
    parsed = lists({"PreSeparateNPUCodes": ["81078603"], "SeparateNPUCodes": ["110001024"]})
    assert parsed.network_level([LINK_DOWN]) is L.PreSeparateNPU
    assert parsed.network_level([0x110001024]) is L.SeparateNPU
    assert parsed.network_level([LINK_DOWN, 0x110001024]) is L.SeparateNPU


@pytest.mark.parametrize(
    "key", ["RestartRequestCodes", "RestartBusinessCodes", "RestartNPUCodes", "FreeRestartNPUCodes"]
)
def test_a_network_code_in_a_list_without_network_meaning_is_not_handled_with_a_note(key: str) -> None:
    parsed, notes = parse_fault_codes(json.dumps({key: ["81078603"]}), SOURCE)
    assert parsed.network_level([LINK_DOWN]) is L.NotHandleFault
    assert [(note.entry, "is a network code" in note.message) for note in notes] == [(key, True)]


def test_an_unknown_network_code_is_pre_separate() -> None:
    assert lists({}).network_level([LINK_DOWN]) is L.PreSeparateNPU


def test_the_explicit_network_lists_apply() -> None:
    parsed, notes = parse_fault_codes(
        json.dumps({"SeparateNPUNetworkCodes": ["81078603"], "SubHealthFaultNetworkCodes": ["80E01801"]}),
        SOURCE,
    )
    assert parsed.network_level([LINK_DOWN]) is L.SeparateNPU
    assert [note.entry for note in notes] == ["SubHealthFaultNetworkCodes"]  # not a network code


# -- properties -----------------------------------------------------------------------------

chip_codes = st.integers(0x80000000, 0x80000040).filter(lambda code: code not in NETWORK_CODES)
listings = st.dictionaries(chip_codes, st.sampled_from([level for _, level in CHIP_LISTS]), max_size=30)


@PROPERTIES
@given(listings, st.lists(chip_codes, max_size=8), st.dictionaries(chip_codes, st.integers(0, 3) | st.none()))
def test_the_level_is_the_most_severe_listed_code_else_the_severity_rule(
    listing: dict[int, FaultLevel], codes: list[int], severities: dict[int, int | None]
) -> None:
    parsed = FaultCodeLists().with_overlay(listing)
    known = [listing[code] for code in codes if code in listing]
    level = parsed.chip_level(codes, severities)
    if not codes:
        assert level is L.NormalNPU
    elif known:
        assert level is max(known)
    else:
        severe = any(severities.get(code) is None or (severities[code] or 0) > 1 for code in codes)
        assert level is (L.SeparateNPU if severe else L.NotHandleFault)


@PROPERTIES
@given(listings)
def test_an_overlay_moves_each_code_to_exactly_one_list(listing: dict[int, FaultLevel]) -> None:
    parsed = builtin_codes().with_overlay(listing)
    for code, level in listing.items():
        assert [lvl for lvl, codes in parsed.chip.items() if code in codes] == [level]
