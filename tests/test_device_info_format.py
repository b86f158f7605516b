"""The device-info ConfigMap's content in Huawei's format: keys per family, fault elements, CheckCode."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from fault_policy_harness import LINK_DOWN, Node, configured

from ascend_plugin.faces.kube.huawei_format import (
    DESCRIPTION,
    NOT_QUERIED,
    UNAVAILABLE,
    ChipReport,
    DeviceInfoContent,
    SuperPodPlace,
    build_device_info,
    check_code,
    decode_upgrade_reasons,
    device_names,
    encode_upgrade_reasons,
    go_json,
    go_map,
    parse_device_names,
)
from ascend_plugin.fault_policy.escalations import UpgradeKind, UpgradeReason
from ascend_plugin.fault_policy.faults import FaultLevel
from backends.families import ASCEND_310, ASCEND_310B, ASCEND_310P, ASCEND_910, ASCEND_950, FamilyTable

L = FaultLevel
ASCEND910 = "huawei.com/Ascend910"

# Derived by hand from Huawei's source, not from our code: WriteDeviceInfoDataIntoCM sets
# CheckCode = common.MakeDataHash(nodeDeviceData.DeviceInfo), which is hex(sha256(json.Marshal(v)))
# of NodeDeviceInfo{DeviceList map[string]string; UpdateTime int64}. encoding/json writes the
# fields in declaration order, the map's keys sorted bytewise, no spaces; inside strings it
# escapes '"' and '\' with a backslash, '\t' as \t, '<' '>' '&' U+2028 as \u003c \u003e \u0026
# \u2028, and leaves other UTF-8 (é) as it is. The -Fault value is itself Go JSON, escaped again.
# The digest is `sha256sum` of exactly these bytes.
VECTOR = (
    '{"DeviceList":{"huawei.com/Ascend910":"Ascend910-0,Ascend910-1",'
    '"huawei.com/Ascend910-Fault":"[{\\"fault_code\\":\\"\\\\u003c\\"}]",'
    '"huawei.com/Ascend910-Unhealthy":"Ascend910-2",'
    '"x\\u003c\\u0026\\u003e":"tab\\there \u00e9\\u2028"},"UpdateTime":1767225601}'
).encode()
VECTOR_SHA256 = "ebc3ee788533759c066bee4b08e14104b778f238ab3823a767f93019d2fe8564"


def test_check_code_hashes_go_json_of_device_info_exactly() -> None:
    assert hashlib.sha256(VECTOR).hexdigest() == VECTOR_SHA256
    device_list = {
        "x<&>": "tab\there \u00e9\u2028",
        "huawei.com/Ascend910-Unhealthy": "Ascend910-2",
        "huawei.com/Ascend910-Fault": go_json([{"fault_code": "<"}]),
        "huawei.com/Ascend910": "Ascend910-0,Ascend910-1",
    }
    device_info = {"DeviceList": go_map(device_list), "UpdateTime": 1767225601}
    assert go_json(device_info).encode() == VECTOR
    assert check_code(device_info) == VECTOR_SHA256
    document = json.loads(DeviceInfoContent(device_list, "").data(1767225601)["DeviceInfoCfg"])
    assert document["CheckCode"] == VECTOR_SHA256


def test_go_json_escapes_control_characters_as_go_1_22_and_later() -> None:
    assert go_json('\b\f\n\r\t\x01\x1f\x7f"\\') == '"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\\"\\\\"'


def test_the_data_keys_are_huaweis() -> None:
    data = DeviceInfoContent({ASCEND910: ""}, "Ascend910-1").data(5)
    assert set(data) == {"DeviceInfoCfg", "ManuallySeparateNPU", "UpgradeFaultReason", "Description"}
    assert data["Description"] == DESCRIPTION
    assert data["ManuallySeparateNPU"] == "Ascend910-1"
    assert data["UpgradeFaultReason"] == "{}"
    assert list(json.loads(data["DeviceInfoCfg"])) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"]


@pytest.mark.parametrize(
    ("table", "keys"),
    [
        (
            ASCEND_910,
            {
                ASCEND910,
                f"{ASCEND910}-Unhealthy",
                f"{ASCEND910}-NetworkUnhealthy",
                f"{ASCEND910}-Recovering",
                f"{ASCEND910}-Fault",
            },
        ),
        (
            ASCEND_310P,
            {"huawei.com/Ascend310P", "huawei.com/Ascend310P-Unhealthy", "huawei.com/Ascend310P-Fault"},
        ),
        # Huawei files the faults of 310 (and 310B) nodes under the 310P key.
        (
            ASCEND_310,
            {"huawei.com/Ascend310", "huawei.com/Ascend310-Unhealthy", "huawei.com/Ascend310P-Fault"},
        ),
        (
            ASCEND_310B,
            {"huawei.com/Ascend310", "huawei.com/Ascend310-Unhealthy", "huawei.com/Ascend310P-Fault"},
        ),
        (
            ASCEND_950,
            {
                "huawei.com/npu",
                "huawei.com/npu-Unhealthy",
                "huawei.com/npu-NetworkUnhealthy",
                "huawei.com/npu-Recovering",
                "huawei.com/npu-Fault",
            },
        ),
    ],
)
def test_the_device_list_keys_per_family(table: FamilyTable, keys: set[str]) -> None:
    assert set(build_device_info([], table).device_list) == keys


def test_the_keys_follow_the_family_under_a_resource_name_of_the_operators() -> None:
    table = ASCEND_910.with_overrides(resource_name="example.com/npu")
    assert set(build_device_info([], table).device_list) == {
        "example.com/npu",
        "example.com/npu-Unhealthy",
        "example.com/npu-NetworkUnhealthy",
        "example.com/npu-Recovering",
        "example.com/npu-Fault",
    }


@pytest.mark.parametrize(
    ("place", "written"),
    [
        (UNAVAILABLE, (-2, -2)),
        (NOT_QUERIED, (-1, -1)),
        (SuperPodPlace.from_driver(0xFFFFFFFF, 0xFFFFFFFF), (-1, -1)),
        (SuperPodPlace.from_driver(7, 3), (7, 3)),
    ],
)
def test_super_pod_id_and_server_index(place: SuperPodPlace, written: tuple[int, int]) -> None:
    document = json.loads(build_device_info([], ASCEND_910, super_pod=place).data(1)["DeviceInfoCfg"])
    assert (document["SuperPodID"], document["ServerIndex"]) == written


def report(node: Node, phy: int, *, healthy: bool | None = None) -> ChipReport:
    return ChipReport.judged(f"Ascend910-{phy}", phy, node.judge(phy), healthy=healthy)


def device_list(reports: list[ChipReport], **options: Any) -> dict[str, str]:
    data = build_device_info(reports, ASCEND_910, **options).data(1_767_225_601)
    listed: dict[str, str] = json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
    return listed


def test_a_chip_with_network_and_chip_faults_has_two_elements_network_first() -> None:
    node = Node()
    node.raised(1, LINK_DOWN)
    link_down_at = node.clock.ms
    node.clock.advance(21)
    node.raised(1, 0x80E18402)  # SeparateNPU
    separate_at = node.clock.ms
    listed = device_list([report(node, 0), report(node, 1)])
    assert listed[ASCEND910] == "Ascend910-0"
    assert listed[f"{ASCEND910}-Unhealthy"] == "Ascend910-1"
    assert listed[f"{ASCEND910}-NetworkUnhealthy"] == "Ascend910-1"
    assert listed[f"{ASCEND910}-Recovering"] == ""
    assert json.loads(listed[f"{ASCEND910}-Fault"]) == [
        {
            "fault_type": "CardNetworkUnhealthy",
            "npu_name": "Ascend910-1",
            "large_model_fault_level": "PreSeparateNPU",
            "fault_level": "PreSeparateNPU",
            "fault_handling": "PreSeparateNPU",
            "fault_code": "81078603",
            # The escalation's time: when the link had been down for 20 s.
            "fault_time_and_level_map": {
                "81078603": {"fault_time": link_down_at + 20_000, "fault_level": "PreSeparateNPU"}
            },
        },
        {
            "fault_type": "CardUnhealthy",
            "npu_name": "Ascend910-1",
            "large_model_fault_level": "SeparateNPU",
            "fault_level": "SeparateNPU",
            "fault_handling": "SeparateNPU",
            "fault_code": "80E18402",
            "fault_time_and_level_map": {
                "80E18402": {"fault_time": separate_at, "fault_level": "SeparateNPU"}
            },
        },
    ]
    fault_text = listed[f"{ASCEND910}-Fault"]
    assert (
        fault_text.index('"fault_type"')
        < fault_text.index('"npu_name"')
        < fault_text.index('"fault_time_and_level')
    )


def test_a_separated_chip_whose_fault_cleared_keeps_an_element_naming_the_escalated_code() -> None:
    node = Node()
    for _ in range(3):
        node.raised(0, 0x80E18005)
        node.cleared(0, 0x80E18005)
    [element] = json.loads(device_list([report(node, 0)])[f"{ASCEND910}-Fault"])
    assert (element["fault_type"], element["fault_level"], element["fault_code"]) == (
        "CardUnhealthy",
        "ManuallySeparateNPU",
        "80E18005",
    )


def test_a_not_handled_code_on_a_healthy_chip_still_has_its_element() -> None:
    node = Node()
    node.raised(0, 0x80E21007)
    [element] = json.loads(device_list([report(node, 0)])[f"{ASCEND910}-Fault"])
    assert element["fault_level"] == "NotHandleFault"
    assert device_list([report(node, 0)])[ASCEND910] == "Ascend910-0"


def test_a_chip_unhealthy_for_another_reason_has_an_element_without_codes() -> None:
    [element] = json.loads(device_list([report(Node(), 0, healthy=False)])[f"{ASCEND910}-Fault"])
    assert (element["fault_type"], element["fault_code"], element["fault_time_and_level_map"]) == (
        "CardUnhealthy",
        "",
        {},
    )


def test_an_escalation_at_a_healthy_level_alone_writes_no_element() -> None:
    # Huawei writes an element for a chip with current codes, or an unhealthy one.
    rule = {"EventId": ["A0000001"], "TimeWindow": 600, "Times": 1, "FaultHandling": "SubHealthFault"}
    node = Node(configured(customization={"FaultFrequency": [{**rule, "ReleaseTimeWindow": 600}]}))
    node.raised(0, 0xA0000001)
    node.cleared(0, 0xA0000001)
    judged = node.judge(0)
    assert (judged.level, judged.chip.codes) == (L.SubHealthFault, ("A0000001",))
    assert device_list([report(node, 0)])[f"{ASCEND910}-Fault"] == "[]"


def test_no_faults_write_an_empty_list() -> None:
    assert device_list([report(Node(), 0)])[f"{ASCEND910}-Fault"] == "[]"


def test_families_without_network_health_have_no_network_key_or_element_for_it() -> None:
    content = build_device_info([ChipReport("Ascend310P-0", 0, True, network_healthy=False)], ASCEND_310P)
    assert content.device_list["huawei.com/Ascend310P-Fault"] == "[]"


def test_names_are_sorted_as_go_sorts_strings_and_held_chips_are_not_free() -> None:
    reports = [ChipReport(f"Ascend910-{phy}", phy, healthy=phy != 3) for phy in (1, 2, 3, 10, 11)]
    listed = device_list(reports, held=frozenset({11}))
    assert listed[ASCEND910] == "Ascend910-1,Ascend910-10,Ascend910-2"


def test_manually_separated_names_are_written_and_read_back() -> None:
    assert device_names("Ascend910", [3, 0]) == "Ascend910-0,Ascend910-3"
    assert device_names("Ascend910", []) == ""
    phys, problems = parse_device_names(
        "Ascend910-0, Ascend910-3,,Ascend310P-1,Ascend910-x,Ascend910-0", "Ascend910"
    )
    assert phys == [0, 3]
    assert [problem.split("'")[1] for problem in problems] == ["Ascend310P-1", "Ascend910-x"]
    assert parse_device_names("", "Ascend910") == ([], [])


def test_upgrade_fault_reasons_in_huaweis_shape() -> None:
    reasons = {
        10: [UpgradeReason("80e18005", L.ManuallySeparateNPU, UpgradeKind.FREQUENCY, 1_767_225_600_000)],
        2: [
            UpgradeReason("81078603", L.PreSeparateNPU, UpgradeKind.DURATION, 5),
            UpgradeReason("AutofillFaultCode", L.ManuallySeparateNPU, UpgradeKind.AUTOFILL, 6),
        ],
        3: [],
    }
    text = encode_upgrade_reasons(reasons, "Ascend910")
    assert text == (
        '{"Ascend910-10":[{"upgrade_time":1767225600000,"fault_code":"80e18005",'
        '"fault_level":"ManuallySeparateNPU","upgrade_type":"FaultFrequency"}],'
        '"Ascend910-2":[{"upgrade_time":5,"fault_code":"81078603","fault_level":"PreSeparateNPU",'
        '"upgrade_type":"FaultDuration"},{"upgrade_time":6,"fault_code":"AutofillFaultCode",'
        '"fault_level":"ManuallySeparateNPU","upgrade_type":"FaultAutofill"}]}'
    )
    assert decode_upgrade_reasons(text, "Ascend910") == ({10: reasons[10], 2: reasons[2]}, [])
    assert encode_upgrade_reasons({}, "Ascend910") == "{}"


@pytest.mark.parametrize(
    ("text", "kept", "problem"),
    [
        ("{", {}, "is not valid JSON"),
        ("[]", {}, "must be a JSON object"),
        ('{"Ascend910": []}', {}, "entry 'Ascend910' is not 'Ascend910-<id>'"),
        ('{"Ascend910-1": {}}', {}, "entry 'Ascend910-1'"),
        (
            '{"Ascend910-1": [{"upgrade_time": "5", "fault_code": "1", "fault_level": "SeparateNPU",'
            ' "upgrade_type": "FaultFrequency"}, {"upgrade_time": 5, "fault_code": "1",'
            ' "fault_level": "SeparateNPU", "upgrade_type": "FaultFrequency"}]}',
            {1: [UpgradeReason("1", L.SeparateNPU, UpgradeKind.FREQUENCY, 5)]},
            "is not a reason",
        ),
        (
            '{"Ascend910-1": [{"upgrade_time": 5, "fault_code": "1", "fault_level": "Bad",'
            ' "upgrade_type": "FaultFrequency"}]}',
            {},
            "is not a reason",
        ),
    ],
)
def test_a_bad_entry_of_upgrade_fault_reason_is_skipped_and_named(
    text: str, kept: dict[int, list[UpgradeReason]], problem: str
) -> None:
    reasons, problems = decode_upgrade_reasons(text, "Ascend910")
    assert reasons == kept
    assert len(problems) == 1
    assert problem in problems[0]


def test_an_empty_upgrade_fault_reason_reads_as_none() -> None:
    assert decode_upgrade_reasons("", "Ascend910") == ({}, [])
