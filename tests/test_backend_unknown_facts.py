"""A DCMI error that leaves a chip's fact unknown is said at debug level: the function, the chip, the code."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
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
