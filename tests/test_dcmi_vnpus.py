"""Static vNPUs through VDEV_MNG: the ids from GET_TOTAL_RESOURCE, each one from GET_VDEV_RESOURCE.

Both fakes answer from the scenario's per-chip ``vdevs`` and see an edit on the
next call, as a driver sees ``npu-smi set -t create-vnpu`` / ``destroy-vnpu``.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer

from backends.dcmi._dcmi_cffi import ffi
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import VdevInfo

VIR02 = {"template": "vir02", "memory_mb": 6144}


def _duo(chip0: list[dict[str, Any]], chip1: list[dict[str, Any]] | None = None) -> FakeScenario:
    """An Atlas 300I Duo: two 310P3 chips on card 0."""
    return FakeScenario.model_validate(
        {
            "chip_name": "310P3",
            "memory_mb": 24576,
            "chips": [
                {"phy_id": 0, "card_id": 0, "vdevs": chip0},
                {"phy_id": 1, "card_id": 0, "vdevs": chip1 or []},
            ],
        }
    )


def test_a_split_chip_lists_its_vnpus_and_describes_each(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(
        _duo(
            [
                VIR02 | {"vdev_id": 100},
                VIR02 | {"vdev_id": 101, "in_use": True},
                {"vdev_id": 102, "template": "vir04", "memory_mb": 12288, "status": 1, "vfg_id": 6},
            ]
        )
    )
    assert library.vdev_ids(0, 0) == [100, 101, 102]
    assert library.vdev_ids(0, 1) == []  # splittable, not split
    assert library.vdev_info(0, 0, 101) == VdevInfo(
        vdev_id=101, template="vir02", aicore=2.0, memory_mb=6144, vfg_id=1, status=0, in_use=True
    )
    assert library.vdev_info(0, 0, 102) == VdevInfo(
        vdev_id=102, template="vir04", aicore=4.0, memory_mb=12288, vfg_id=6, status=1, in_use=False
    )
    assert library.total_aicore(0, 0) == 8.0  # the chip's own figure is unchanged by the split


def test_a_910b_split_takes_its_figures_from_the_template(any_fake: ScenarioPlayer[Any]) -> None:
    scenario = {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "chips": [{"phy_id": 0, "vdevs": [{"vdev_id": 1122, "template": "vir10_3c_32g"}]}],
    }
    library = any_fake.open(FakeScenario.model_validate(scenario))
    info = library.vdev_info(0, 0, 1122)
    assert (info.template, info.aicore, info.memory_mb) == ("vir10_3c_32g", 10.0, 32768)


def test_a_vnpu_not_on_that_chip_is_an_invalid_parameter(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_duo([VIR02 | {"vdev_id": 100}], [VIR02 | {"vdev_id": 200}]))
    with pytest.raises(DcmiError) as raised:
        library.vdev_info(0, 0, 200)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_info", -8001)


def test_a_driver_without_vdev_mng_answers_not_supported(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate({"chip_name": "310", "chips": [{"phy_id": 0}]}))
    for call in (library.vdev_ids, library.total_aicore):
        with pytest.raises(DcmiError, match="dcmi_get_device_info returned -8255"):
            call(0, 0)
    with pytest.raises(DcmiError, match="dcmi_get_device_info returned -8255"):
        library.vdev_info(0, 0, 100)


def test_a_soc_board_answers_the_query_but_has_no_vnpus(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    assert library.total_aicore(0, 0) == 1.0
    assert library.vdev_ids(0, 0) == []


def test_creating_and_destroying_vnpus_is_seen_on_the_next_call(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_duo([]))
    assert library.vdev_ids(0, 0) == []
    any_fake.update(_duo([VIR02 | {"vdev_id": 100}, VIR02 | {"vdev_id": 101}]))
    assert library.vdev_ids(0, 0) == [100, 101]
    any_fake.update(_duo([VIR02 | {"vdev_id": 101}]))
    assert library.vdev_ids(0, 0) == [101]
    with pytest.raises(DcmiError, match="-8001"):
        library.vdev_info(0, 0, 100)


def test_errors_on_the_total_resource_query_cover_vdev_ids_too(any_fake: ScenarioPlayer[Any]) -> None:
    # One query answers both total_aicore and vdev_ids, so one injected error fails both.
    busy = _duo([VIR02 | {"vdev_id": 100}]).model_dump() | {"errors": {"total_aicore": -8020}}
    library = any_fake.open(FakeScenario.model_validate(busy))
    with pytest.raises(DcmiError, match="dcmi_get_device_info returned -8020"):
        library.vdev_ids(0, 0)
    assert library.vdev_info(0, 0, 100).template == "vir02"


def test_the_c_fake_checks_the_query_buffer(c_fake: CFakePlayer) -> None:
    c_fake.update(_duo([VIR02 | {"vdev_id": 100}]))
    lib = ffi.dlopen(str(c_fake.library_path))
    try:
        assert lib.dcmi_init() == 0
        query = ffi.new("struct dcmi_vdev_query_stru *", {"vdev_id": 100})
        size = ffi.new("unsigned int *", ffi.sizeof(query[0]) - 1)
        vdev_mng, vdev_resource = ffi.integer_const("DCMI_MAIN_CMD_VDEV_MNG"), 0
        assert lib.dcmi_get_device_info(0, 0, vdev_mng, vdev_resource, query, size) == -8001
        size[0] = ffi.sizeof(query[0])
        assert lib.dcmi_get_device_info(0, 0, vdev_mng, vdev_resource, query, size) == 0
        assert (query.vdev_id, ffi.string(query.query_info.name), query.query_info.computing.aic) == (
            100,
            b"vir02",
            2.0,
        )
        assert size[0] == 264
    finally:
        ffi.dlclose(lib)
