"""Each family reads the device memory its chips have: HBM on the 910 families, DDR elsewhere, one call."""

from __future__ import annotations

from typing import Any, cast

import pytest
from fake_dcmi.players import ScenarioPlayer
from node_harness import CallCounter, backend_of

from backends.backend import MemoryKind
from backends.fake import FakeScenario
from backends.library import DeviceLibrary


@pytest.mark.parametrize(
    ("chip_name", "kind", "asked", "not_asked"),
    [
        ("910A", MemoryKind.HBM, "hbm_info", "memory_info"),
        ("910B3", MemoryKind.HBM, "hbm_info", "memory_info"),
        ("Ascend910", MemoryKind.HBM, "hbm_info", "memory_info"),
        ("310P3", MemoryKind.DDR, "memory_info", "hbm_info"),
        ("310B1", MemoryKind.DDR, "memory_info", "hbm_info"),
        ("310", MemoryKind.DDR, "memory_info", "hbm_info"),
    ],
)
def test_the_family_asks_the_one_call_for_its_memory(
    any_fake: ScenarioPlayer[Any], chip_name: str, kind: MemoryKind, asked: str, not_asked: str
) -> None:
    scenario = FakeScenario.model_validate(
        {"chip_name": chip_name, "memory_mb": 24576, "chips": [{"phy_id": 0}]}
    )
    counter = CallCounter(any_fake.open(scenario))
    backend = backend_of(cast(DeviceLibrary, counter))
    assert backend.memory_kind is kind
    memory = backend.memory(backend.session.discover()[0])
    assert memory is not None
    assert (memory.total_mb, memory.used_mb) == (24576, 0)
    assert (counter.calls[asked], counter.calls[not_asked]) == (1, 0)


def test_a_910a_whose_hbm_query_fails_has_unknown_memory_not_its_ddr(any_fake: ScenarioPlayer[Any]) -> None:
    # A first-generation 910 also has DDR, but containers get its HBM: a DDR figure would be the wrong one.
    scenario = FakeScenario.model_validate(
        {"chip_name": "910A", "chips": [{"phy_id": 0, "errors": {"hbm_info": -8020}}]}
    )
    backend = backend_of(any_fake.open(scenario))
    assert backend.memory(backend.session.discover()[0]) is None


def test_a_310p_without_the_hbm_query_is_not_concerned(any_fake: ScenarioPlayer[Any]) -> None:
    scenario = FakeScenario.model_validate(
        {"chip_name": "310P3", "memory_mb": 24576, "missing": ["hbm_info"], "chips": [{"phy_id": 0}]}
    )
    backend = backend_of(any_fake.open(scenario))
    assert "dcmi_get_device_hbm_info" in backend.missing
    memory = backend.memory(backend.session.discover()[0])
    assert memory is not None
    assert (memory.total_mb, memory.used_mb) == (24576, 0)


def test_a_driver_without_the_familys_memory_call_leaves_it_unknown_unasked(
    any_fake: ScenarioPlayer[Any],
) -> None:
    scenario = FakeScenario.model_validate(
        {"chip_name": "910B3", "missing": ["hbm_info"], "chips": [{"phy_id": 0}]}
    )
    counter = CallCounter(any_fake.open(scenario))
    backend = backend_of(cast(DeviceLibrary, counter))
    chip = backend.session.discover()[0]
    assert (backend.memory(chip), backend.memory(chip)) == (None, None)
    assert counter.calls["hbm_info"] == 0  # the library said at init that it lacks it
