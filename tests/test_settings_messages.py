"""A refused setting says, in an operator's words, what it must look like: its form with an
example for the pattern-constrained ones, the whole range (both ends, with the unit) for the
bounded ones, never a bare regular expression or only the side that was broken."""

from __future__ import annotations

import re

import pytest

from ascend_plugin.cli import EXIT_BAD_SETTINGS, main
from ascend_plugin.settings import ALLOWED_FORMS, Settings, SettingsError, load_settings

BASE = {"backend": "fake", "fake_scenario": "/s.json"}


def refusal(**values: object) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, **values})
    return str(refused.value)


def patterned_fields() -> set[str]:
    return {
        name
        for name, info in Settings.model_fields.items()
        if any(getattr(item, "pattern", None) for item in info.metadata)
    }


def test_every_pattern_constrained_setting_has_its_form_in_words() -> None:
    assert set(ALLOWED_FORMS) == patterned_fields()


@pytest.mark.parametrize("field", sorted(ALLOWED_FORMS))
def test_the_example_of_each_form_is_accepted(field: str) -> None:
    examples = re.findall(r"such as (\S+?)[,(]?(?:\s|$)", ALLOWED_FORMS[field])
    assert examples, f"{field}: its form gives no example"
    for example in examples:
        assert getattr(load_settings({**BASE, field: example}), field) == example


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("http_address", "foo", "host:port such as 0.0.0.0:11251"),
        ("label_prefix", "Foo_", "a DNS subdomain"),
        ("socket_name", "plugin", "ends in .sock, such as Ascend310.sock"),
        ("cdi_kind", "npu", "vendor/class"),
        ("device_id_prefix", "-Ascend", "such as Ascend310"),
        ("dra_driver_name", "NPU.Huawei.com", "such as npu.huawei.com"),
        ("dra_driver_name", "a" * 64, "of at most 63 characters"),
    ],
)
def test_a_value_of_the_wrong_form_is_explained(field: str, value: str, words: str) -> None:
    message = refusal(**{field: value})
    env = f"ASCEND_DP_{field.upper()}"
    flag = "--" + field.replace("_", "-")
    assert message.startswith(f"invalid setting {field} ({flag} / {env}): got {value!r}: must be ")
    assert words in message
    assert "pattern" not in message
    assert "^" not in message


def test_the_empty_http_address_is_named_as_turning_the_server_off() -> None:
    assert load_settings({**BASE, "http_address": ""}).http_address == ""
    assert "or empty to turn the HTTP server off" in refusal(http_address="localhost")


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("telemetry_interval", 0.5, "got 0.5: must be 1-3600 seconds"),
        ("telemetry_interval", 3601, "got 3601: must be 1-3600 seconds"),
        ("health_interval", 0, "got 0: must be above 0 and at most 3600 seconds"),
        ("kubelet_watch_interval", 6, "got 6: must be above 0 and at most 5 seconds"),
        ("hot_reset_idle", -1, "got -1: must be 0-86400 seconds"),
        ("share_count", 0, "got 0: must be 1-100"),
        ("health_failure_threshold", 101, "got 101: must be 1-100"),
        ("ai_core_min", -1, "got -1: must be 0 or more"),
    ],
)
def test_a_value_out_of_range_is_told_the_whole_range(field: str, value: object, rule: str) -> None:
    assert rule in refusal(**{field: value})


def test_a_value_that_is_no_number_is_told_the_range_too() -> None:
    message = refusal(telemetry_slow_interval="soon")
    assert "got 'soon': Input should be a valid number" in message
    assert message.endswith("; must be 1-86400 seconds")


def test_every_problem_at_once_gets_its_own_line_and_rule() -> None:
    assert refusal(share_count=0, http_address="foo").splitlines() == [
        "invalid setting share_count (--share-count / ASCEND_DP_SHARE_COUNT): got 0: must be 1-100",
        "invalid setting http_address (--http-address / ASCEND_DP_HTTP_ADDRESS): got 'foo': must be "
        + ALLOWED_FORMS["http_address"],
    ]


def test_the_command_line_exits_2_with_the_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--backend", "fake", "--fake-scenario", "/s.json", "--http-address", "foo"]
    assert main(argv) == EXIT_BAD_SETTINGS
    assert "got 'foo': must be host:port such as 0.0.0.0:11251" in capsys.readouterr().err
