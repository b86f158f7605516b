"""Where the fault configuration comes from: Huawei's ConfigMap, the operator's file, the built-ins."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fault_policy_harness import configured

from ascend_plugin.fault_policy.config import (
    BUILTIN_CUSTOMIZATION,
    BUILTIN_FAULT_CODES,
    BaseConfig,
    base_config,
    builtin_codes,
    builtin_customization,
    fault_config,
    parse_poll_interval,
)
from ascend_plugin.fault_policy.customization import NEVER, FrequencyRule
from ascend_plugin.fault_policy.documents import FaultConfigError
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultPolicy

L = FaultLevel
WHERE = "kube-system/mindx-dl-fault-config"


def test_without_the_configmap_every_part_is_built_in() -> None:
    config = configured()
    assert config.codes == builtin_codes()
    assert config.customization == builtin_customization()
    assert config.poll_interval == 300
    assert dict(config.sources) == {
        "faultCode.json": BUILTIN_FAULT_CODES,
        "faultCustomization.json": BUILTIN_CUSTOMIZATION,
        "PollInterval": "default",
    }
    assert config.notes == ()


def test_the_configmaps_keys_replace_the_built_ins() -> None:
    config = configured(
        {"SeparateNPUCodes": ["A0000001"]},
        {
            "FaultFrequency": [
                {
                    "EventId": ["A0000001"],
                    "TimeWindow": 60,
                    "Times": 1,
                    "FaultHandling": "ManuallySeparateNPU",
                }
            ]
        },
        PollInterval="60",
    )
    assert config.codes.list_level(0xA0000001) is L.SeparateNPU
    assert config.codes.list_level(0x80E18402) is None  # the whole built-in list is replaced, not extended
    assert set(config.customization.frequency) == {0xA0000001}
    assert config.poll_interval == 60
    assert config.sources["faultCode.json"] == f"faultCode.json of {WHERE}"
    assert config.sources["PollInterval"] == f"PollInterval of {WHERE}"


@pytest.mark.parametrize("key", ["faultCode.json", "faultCustomization.json"])
def test_a_missing_key_uses_the_built_in_file(key: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "ascend_plugin.fault_policy"):
        config = fault_config(base_config(None), {"PollInterval": "300"})
    assert config.sources[key].startswith("built-in")
    record = next(record for record in caplog.records if getattr(record, "entry", None) == key)
    assert record.levelno == logging.WARNING
    assert getattr(record, "source", None) == WHERE


@pytest.mark.parametrize(
    ("key", "text", "why"),
    [
        ("faultCode.json", "{broken", "is not valid JSON"),
        ("faultCode.json", '{"SeparateNPUCodes": "80E18402"}', "SeparateNPUCodes must be an array"),
        ("faultCustomization.json", '{"FaultFrequency": [{"Times": "x"}]}', "Times must be a whole number"),
    ],
)
def test_a_malformed_key_falls_back_with_an_error_saying_why(
    key: str, text: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "ascend_plugin.fault_policy"):
        config = fault_config(base_config(None), {key: text})
    assert config.sources[key].startswith("built-in")
    errors = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert [getattr(record, "entry", None) for record in errors] == [key]
    assert why in errors[0].getMessage()  # what is wrong in the document
    assert config.codes == builtin_codes()
    assert config.customization == builtin_customization()


@pytest.mark.parametrize(
    ("text", "seconds", "noted"),
    [
        (None, 300, False),
        ("300", 300, False),
        ("30", 30, False),
        ("3600", 3600, False),
        ("+60", 60, False),  # strconv.Atoi takes a sign
        ("29", 300, True),
        ("3601", 300, True),
        ("-60", 300, True),
        ("60s", 300, True),
        (" 60", 300, True),
        ("", 300, True),
        ("1e2", 300, True),
    ],
)
def test_poll_interval_is_read_as_huawei_reads_it(text: str | None, seconds: int, noted: bool) -> None:
    interval, note = parse_poll_interval(text, WHERE)
    assert interval == seconds
    assert (note is not None) is noted
    if note is not None:
        assert (note.entry, note.error) == ("PollInterval", True)


def polled_level(base: BaseConfig, code: int) -> L:
    """The level the policy on ``base`` (no ConfigMap) gives a chip a poll found ``code`` on."""
    policy = FaultPolicy(fault_config(base, None))
    policy.reconcile(0, [code])
    return policy.judge(0).level


def test_an_operators_file_in_huaweis_format_replaces_the_built_in_lists(tmp_path: Path) -> None:
    path = tmp_path / "faultCode.json"
    path.write_text(
        json.dumps({"SeparateNPUCodes": ["A0000001", "bad"], "NotHandleFaultCodes": ["80E18402"]})
    )
    base = base_config(path)
    assert base.codes.list_level(0xA0000001) is L.SeparateNPU
    assert base.codes.list_level(0x80E18402) is L.NotHandleFault
    assert base.codes_source == f"fault-level file {path}"
    # A malformed faultCode.json key of the ConfigMap falls back to it (Huawei: /usr/local/faultCode.json).
    config = fault_config(base, {"faultCode.json": "{"})
    assert config.codes == base.codes
    # And the policy judges by the file's lists.
    assert polled_level(base, 0xA0000001) is L.SeparateNPU
    assert polled_level(base, 0x80E21007) is L.NotHandleFault  # unlisted now, and polled


def test_an_operators_file_in_the_plugins_format_is_laid_over_the_lists(tmp_path: Path) -> None:
    path = tmp_path / "levels.json"
    path.write_text(
        json.dumps(
            {"SeparateNPU": ["80E21007"], "ManuallySeparateNPU": ["A0000001"], "NormalNPU": ["80E18402"]}
        )
    )
    assert base_config(path).codes_source == BUILTIN_FAULT_CODES  # the lists stay the built-in ones
    config = fault_config(
        base_config(path), {"faultCode.json": json.dumps({"NotHandleFaultCodes": ["80E21007"]})}
    )
    assert config.codes.list_level(0x80E21007) is L.SeparateNPU  # the overlay wins over the ConfigMap's lists
    assert (
        config.codes.list_level(0x80E18402) is L.NotHandleFault
    )  # NormalNPU: ignored, Huawei's NotHandleFault
    # ManuallySeparateNPU is Huawei's FaultFrequency with Times 1.
    assert config.customization.frequency[0xA0000001] == FrequencyRule(60, 1, L.ManuallySeparateNPU, NEVER)
    assert config.codes.list_level(0xA0000001) is L.SeparateNPU
    assert config.sources["overlay"] == f"fault-level file {path}"
    assert polled_level(base_config(path), 0xA0000001) is L.ManuallySeparateNPU  # at its first occurrence


def test_the_config_configmaps_overlay_goes_over_the_files() -> None:
    config = fault_config(
        base_config(None), None, overlay={0x80E21007: L.RestartNPU}, overlay_source="fault_levels.json"
    )
    assert config.codes.list_level(0x80E21007) is L.RestartNPU
    assert config.sources["overlay"] == "fault_levels.json"


def test_a_file_mixing_both_formats_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "levels.json"
    path.write_text(json.dumps({"SeparateNPUCodes": ["80E01801"], "SeparateNPU": ["80E01801"]}))
    with pytest.raises(FaultConfigError, match="mixes Huawei's list names with the plugin's level names"):
        base_config(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"SeparateNPUCodes": 1}', "SeparateNPUCodes must be an array"),
        ('{"Fatal": ["1"]}', "unknown fault level 'Fatal'"),
    ],
)
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "levels.json"
    path.write_text(content)
    with pytest.raises(FaultConfigError, match=str(path)):
        base_config(path)


def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FaultConfigError, match="cannot read fault-level file"):
        base_config(tmp_path / "missing.json")


def test_spellings_come_from_the_lists_then_the_rules() -> None:
    config = configured(
        {"SeparateNPUCodes": ["020001002"]},
        {
            "FaultDuration": [
                {
                    "EventId": ["0A0000001"],
                    "FaultTimeout": 1,
                    "RecoverTimeout": 1,
                    "FaultHandling": "SeparateNPU",
                }
            ]
        },
    )
    assert config.spell(0x20001002) == "020001002"
    assert config.spell(0xA0000001) == "0a0000001"
    assert config.spell(0xABC) == "abc"
