"""A driver without some optional functions says so right after init; calling one anyway is SymbolMissing.

The binding learns it by looking the symbols up (never calling them); the
Python fake from its scenario's ``missing`` operations, which the C player turns
into a library variant without those symbols, so an old driver is described once.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, PythonFakePlayer, ScenarioPlayer

from backends.errors import DcmiError, SymbolMissing
from backends.fake import FakeScenario
from backends.fake.scenario import DCMI_FUNCTIONS
from backends.library import OPTIONAL_FUNCTIONS
from backends.session import LibrarySession

WAIT = 30.0  # generous: only a library that calls what it should merely look up would take long
NODE = {"chip_name": "910B3", "chips": [{"phy_id": 0}, {"phy_id": 1}]}
OLD_DRIVER = FakeScenario.model_validate(NODE | {"missing": ["error_codes", "subscribe_faults"]})
# Every operation whose DCMI function is optional.
OPTIONAL_OPERATIONS = sorted(op for op, function in DCMI_FUNCTIONS.items() if function in OPTIONAL_FUNCTIONS)


def test_a_complete_driver_lacks_nothing(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate(NODE))
    assert library.missing_functions() == frozenset()


def test_an_old_driver_names_what_it_lacks_and_keeps_working(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(OLD_DRIVER)
    assert library.missing_functions() == {"dcmi_get_device_errorcode_v2", "dcmi_subscribe_fault_event"}
    assert [chip.phy_id for chip in LibrarySession(library).discover()] == [0, 1]
    with pytest.raises(SymbolMissing) as raised:
        library.error_codes(0, 0)
    assert raised.value.function == "dcmi_get_device_errorcode_v2"
    with pytest.raises(SymbolMissing, match="has no symbol dcmi_subscribe_fault_event"):
        library.subscribe_faults(lambda event: None)
    assert library.health(1, 0) == 0


def test_one_missing_symbol_takes_every_operation_that_needs_it(any_fake: ScenarioPlayer[Any]) -> None:
    # total_aicore, vdev_ids and vdev_info are all dcmi_get_device_info underneath.
    library = any_fake.open(FakeScenario.model_validate(NODE | {"missing": ["vdev_info"]}))
    assert library.missing_functions() == {"dcmi_get_device_info"}
    for call in (library.total_aicore, library.vdev_ids):
        with pytest.raises(SymbolMissing, match="dcmi_get_device_info"):
            call(0, 0)
    with pytest.raises(SymbolMissing, match="dcmi_get_device_info"):
        library.vdev_info(0, 0, 100)


def test_a_missing_required_function_is_not_reported_but_fails(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate(NODE | {"missing": ["chip_info", "hbm_info"]}))
    assert library.missing_functions() == {"dcmi_get_device_hbm_info"}
    with pytest.raises(SymbolMissing, match="dcmi_get_device_chip_info_v2"):
        LibrarySession(library).discover()


@pytest.mark.parametrize("c_fake", [("dcmi_get_device_ip", "dcmi_get_device_pcie_info_v2")], indirect=True)
def test_the_binding_reports_what_a_library_build_left_out(c_fake: CFakePlayer) -> None:
    library = c_fake.open(FakeScenario.model_validate(NODE))
    assert library.missing_functions() == {"dcmi_get_device_ip", "dcmi_get_device_pcie_info_v2"}
    with pytest.raises(SymbolMissing, match="dcmi_get_device_pcie_info_v2"):
        library.pcie_address(0, 0)
    assert str(c_fake.library_path) in str(library.description)


def test_every_optional_function_can_be_missing(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate(NODE | {"missing": OPTIONAL_OPERATIONS}))
    assert library.missing_functions() == OPTIONAL_FUNCTIONS


def test_probing_calls_none_of_them(any_fake: ScenarioPlayer[Any]) -> None:
    # Every optional operation hangs: a library that called one to find out would never answer.
    scenario = FakeScenario.model_validate(NODE | {"hang": OPTIONAL_OPERATIONS})
    library = any_fake.open(scenario, init=False)
    answers: list[frozenset[str]] = []

    def probe() -> None:
        library.init()
        answers.append(library.missing_functions())

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    try:
        worker.join(WAIT)
        assert answers == [frozenset()]
    finally:
        any_fake.update(FakeScenario.model_validate(NODE))  # release anything that did hang


def test_before_init_there_is_nothing_to_tell(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(OLD_DRIVER, init=False)
    with pytest.raises(DcmiError) as raised:
        library.missing_functions()
    assert raised.value.code == -8005
    library.init()
    assert library.missing_functions() == {"dcmi_get_device_errorcode_v2", "dcmi_subscribe_fault_event"}
    library.close()
    with pytest.raises(DcmiError, match="-8005"):
        library.missing_functions()


def test_the_python_fake_keeps_its_functions_while_open(python_fake: PythonFakePlayer) -> None:
    # A loaded library cannot grow or lose symbols: an edit of "missing" counts from the next init.
    library = python_fake.open(OLD_DRIVER)
    python_fake.update(FakeScenario.model_validate(NODE))
    assert library.health(0, 0) == 0  # the edit is read...
    assert "dcmi_get_device_errorcode_v2" in library.missing_functions()  # ...but the symbols stay as loaded
    with pytest.raises(SymbolMissing):
        library.error_codes(0, 0)
    library.close()
    library.init()
    assert library.missing_functions() == frozenset()
    assert library.error_codes(0, 0) == []
