"""A DCMI error a query drops (a fact left unknown, a fallback taken) is said at debug level, with code."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer
from log_records import fields, records
from node_harness import backend_of

from backends.fake import FakeScenario


@pytest.mark.parametrize(
    ("error", "query", "function"),
    [
        ("pcie_address", "pcie_address", "dcmi_get_device_pcie_info_v2"),
        ("hbm_info", "memory", "dcmi_get_device_hbm_info"),
        ("device_ip", "device_ip", "dcmi_get_device_ip"),
        ("total_aicore", "ai_cores", "dcmi_get_device_info"),
    ],
)
def test_the_dropped_error_is_said_with_function_chip_and_code(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture, error: str, query: str, function: str
) -> None:
    chips = [{"phy_id": 0, "device_ip": "29.0.0.10"}, {"phy_id": 3, "errors": {error: -8020}}]
    backend = backend_of(any_fake.open(FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})))
    caplog.set_level(logging.DEBUG, logger="backends.backend")
    healthy, failing = backend.session.discover()
    getattr(backend, query)(healthy)
    assert not caplog.records
    answer = getattr(backend, query)(failing)
    assert answer is None or getattr(answer, "source", None) == "family_nominal"
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG
    assert (record.function, record.chip, record.code) == (function, 3, -8020)  # type: ignore[attr-defined]


def test_the_binding_says_the_ipv4_miss_before_an_ipv6_answer(
    c_fake: CFakePlayer, caplog: pytest.LogCaptureFixture
) -> None:
    chips = [{"phy_id": 0, "card_id": 7, "device_ip": "2001:db8::7"}]
    library = c_fake.open(FakeScenario.model_validate({"chip_name": "910B3", "chips": chips}))
    caplog.set_level(logging.DEBUG, logger="backends.dcmi.library")
    assert library.device_ip(7, 0) == "2001:db8::7"
    (record,) = records(caplog, "backends.dcmi.library", level=logging.DEBUG, function="dcmi_get_device_ip")
    assert fields(record, "card", "device") == {"card": 7, "device": 0}
    assert record.code < 0  # type: ignore[attr-defined]
