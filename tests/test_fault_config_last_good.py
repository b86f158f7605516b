"""A fault configuration change that cannot be read keeps the last one that could, and says so briefly.

A half-edited ``faultCode.json`` in ``mindx-dl-fault-config`` must not release
the chips only that file lists (the built-ins would): its last content read
stays in force until it is fixed or removed. Nesting too deep for the parser is
a document that cannot be read, not a crash; values an operator wrote are
named in the log, never carried whole; ten thousand bad codes make a few lines.
"""

from __future__ import annotations

import json
import logging

import pytest
from log_records import records

from ascend_plugin.fault_policy.config import BUILTIN_FAULT_CODES, FAULT_CODE_KEY, base_config, fault_config
from ascend_plugin.fault_policy.documents import NOTES_LOGGED
from ascend_plugin.fault_policy.faults import FaultLevel
from ascend_plugin.fault_policy.policy import FaultSources

CONFIG = "ascend_plugin.fault_policy.config"
OURS = 0x80E21007  # NotHandleFault in the built-in lists: only the ConfigMap makes it a fault
WHERE = "kube-system/mindx-dl-fault-config"


def configmap(codes_text: str) -> dict[str, str]:
    return {FAULT_CODE_KEY: codes_text}


def separate(*codes: int) -> str:
    return json.dumps({"SeparateNPUCodes": [f"{code:08X}" for code in codes]})


def test_a_malformed_change_keeps_the_last_content_read() -> None:
    sources = FaultSources(base_config(None))
    sources.set_configmap(configmap(separate(OURS)))
    assert sources.config.codes.chip_level([OURS], {}) is FaultLevel.SeparateNPU
    sources.set_configmap(configmap(separate(OURS)[:-3]))  # cut short while being edited
    assert sources.config.codes.chip_level([OURS], {}) is FaultLevel.SeparateNPU
    assert sources.config.sources[FAULT_CODE_KEY] == (
        f"{FAULT_CODE_KEY} of {WHERE}, as last read (its current content cannot be read)"
    )
    # Removing the key is the operator's choice: the base applies again.
    sources.set_configmap({})
    assert sources.config.sources[FAULT_CODE_KEY] == BUILTIN_FAULT_CODES
    assert sources.config.codes.chip_level([OURS], {}) is not FaultLevel.SeparateNPU
    # With nothing read before, a malformed key falls back to the base, as Huawei's does.
    sources.set_configmap(configmap("{"))
    assert sources.config.sources[FAULT_CODE_KEY] == BUILTIN_FAULT_CODES


def test_the_last_content_read_stays_through_several_bad_changes() -> None:
    sources = FaultSources(base_config(None))
    sources.set_configmap(configmap(separate(OURS)))
    for broken in ("{", "[]", '{"SeparateNPUCodes": "80E21007"}'):
        sources.set_configmap(configmap(broken))
        assert sources.config.codes.chip_level([OURS], {}) is FaultLevel.SeparateNPU, broken


def test_nesting_too_deep_is_a_document_that_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    config = fault_config(base_config(None), configmap(deep))
    assert config.sources[FAULT_CODE_KEY] == BUILTIN_FAULT_CODES
    (said,) = records(caplog, CONFIG, level=logging.ERROR)
    assert "nests arrays or objects too deeply to be read" in said.getMessage()


def test_a_value_written_by_an_operator_is_named_not_carried(caplog: pytest.LogCaptureFixture) -> None:
    huge = "x" * 900_000
    fault_config(base_config(None), configmap(json.dumps({"SeparateNPUCodes": [huge], huge: 1})))
    fault_config(base_config(None), configmap(json.dumps({"SeparateNPUCodes": {"a": huge}})))
    said = [record.getMessage() for record in caplog.records]
    assert said
    assert max(len(line) for line in said) < 2000, max(len(line) for line in said)


def test_ten_thousand_bad_codes_make_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    bad = [f"not-a-code-{n}" for n in range(10_000)]
    config = fault_config(base_config(None), configmap(json.dumps({"SeparateNPUCodes": bad})))
    assert len(config.notes) > 10_000  # every one kept (and the missing faultCustomization.json)
    said = records(caplog, CONFIG)
    assert len(said) == NOTES_LOGGED + 1
    unsaid = len(config.notes) - NOTES_LOGGED
    assert said[-1].getMessage() == f"{unsaid} more problems of the same configuration are not logged"
