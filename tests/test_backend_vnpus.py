"""The vNPU families' backends read a chip's static vNPUs, each described afresh; none where unsupported."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from fake_dcmi.players import ScenarioPlayer
from log_records import records
from node_harness import CallCounter, backend_of
from split_nodes import DUO_SPLIT, duo, with_chip

from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import DeviceLibrary


def _backend(player: ScenarioPlayer[Any], scenario: FakeScenario) -> tuple[ChipBackend, CallCounter]:
    counter = CallCounter(player.open(scenario))
    return backend_of(cast(DeviceLibrary, counter)), counter


def _chips(backend: ChipBackend) -> list[Chip]:
    return backend.session.discover()


def test_a_split_chip_lists_its_vnpus_and_a_whole_one_none(any_fake: ScenarioPlayer[Any]) -> None:
    backend, _ = _backend(any_fake, duo())
    first, second = _chips(backend)
    vnpus = backend.vnpus(first)
    assert [(vnpu.vdev_id, vnpu.template, vnpu.aicore) for vnpu in vnpus] == [
        (100, "vir02", 2.0),
        (101, "vir02", 2.0),
        (102, "vir04", 4.0),
    ]
    assert backend.vnpus(second) == []


def test_every_read_describes_every_vnpu_so_a_reused_id_is_seen(any_fake: ScenarioPlayer[Any]) -> None:
    backend, counter = _backend(any_fake, duo())
    chip, whole = _chips(backend)
    counter.calls.clear()
    assert [vnpu.template for vnpu in backend.vnpus(chip)] == ["vir02", "vir02", "vir04"]
    assert backend.vnpus(whole) == []
    assert counter.calls == {"vdev_ids": 2, "vdev_info": 3}  # a whole chip costs one query
    # vNPU 101 destroyed and 100 re-created as a vir04: the same id, another template.
    any_fake.update(duo({0: [{"vdev_id": 100, "template": "vir04", "memory_mb": 12288}]}))
    assert [(vnpu.vdev_id, vnpu.template) for vnpu in backend.vnpus(chip)] == [(100, "vir04")]


def test_a_chip_without_vnpu_support_is_said_once_and_not_asked_again(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="backends.vnpu_family")
    scenario = FakeScenario.model_validate(
        {"chip_name": "310P3", "chips": [{"phy_id": 0, "errors": {"total_aicore": -8255}}]}
    )
    backend, counter = _backend(any_fake, scenario)
    chip = _chips(backend)[0]
    assert backend.vnpus(chip) == []
    assert backend.vnpus(chip) == []
    assert counter.calls["vdev_ids"] == 1
    (said,) = records(caplog, "backends.vnpu_family", level=logging.DEBUG, chip=0)  # said once
    assert "dcmi_get_device_info answers -8255" in said.getMessage()  # the call and its code


def test_a_driver_without_vdev_mng_has_no_vnpus(any_fake: ScenarioPlayer[Any]) -> None:
    backend, counter = _backend(
        any_fake, duo().model_validate(duo().model_dump() | {"missing": ["total_aicore"]})
    )
    assert "dcmi_get_device_info" in backend.missing
    assert backend.vnpus(_chips(backend)[0]) == []
    assert counter.calls["vdev_ids"] == 0


def test_a_vnpu_that_cannot_be_described_is_an_error_not_an_absence(any_fake: ScenarioPlayer[Any]) -> None:
    backend, _ = _backend(any_fake, with_chip(duo({0: DUO_SPLIT[:1]}), 0, errors={"vdev_info": -8012}))
    with pytest.raises(DcmiError) as raised:
        backend.vnpus(_chips(backend)[0])
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_info", -8012)


@pytest.mark.parametrize("chip_name", ["310", "310B1"])
def test_a_family_whose_chips_cannot_be_split_never_asks(
    any_fake: ScenarioPlayer[Any], chip_name: str
) -> None:
    backend, counter = _backend(
        any_fake, FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]})
    )
    assert backend.vnpu_absence()  # its chips are never split
    assert backend.vnpus(_chips(backend)[0]) == []
    assert counter.calls["vdev_ids"] == 0
