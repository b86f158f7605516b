"""AI-core figures through the binding: VDEV_MNG's float first, then chip info, then the family's nominal.

Huawei's plugin reads the same float and checks it against one range for
every chip, [8, 36], which is how a healthy 310B1 (1.0) took the plugin down.
Here each family has its own bounds.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer

from backends.base import AiCoreFigure, ChipBackend
from backends.fake import FakeScenario
from backends.families import Ascend310Backend, Ascend310BBackend, Ascend310PBackend, Ascend910Backend


def _figure(
    c_fake: CFakePlayer, family: type[ChipBackend], node: dict[str, Any]
) -> tuple[ChipBackend, AiCoreFigure]:
    backend = family(c_fake.open(FakeScenario.model_validate({**node, "chips": [{"phy_id": 0}]})))
    (chip,) = backend.discover()
    return backend, backend.ai_cores(chip)


@pytest.mark.parametrize(
    ("family", "node", "figure"),
    [
        (Ascend310BBackend, {"chip_name": "310B1"}, 1.0),
        (Ascend310BBackend, {"chip_name": "310B4"}, 1.0),
        (Ascend310PBackend, {"chip_name": "310P3"}, 8.0),
        (Ascend310PBackend, {"chip_name": "310P1", "aicore": 10.0}, 10.0),
        (Ascend910Backend, {"chip_name": "910B2"}, 24.0),
        (Ascend910Backend, {"chip_name": "910B3"}, 20.0),
        (Ascend910Backend, {"chip_name": "910A", "aicore": 30.0}, 30.0),
        (Ascend910Backend, {"chip_name": "Ascend910", "npu_name": "9391", "aicore": 24.0}, 24.0),
    ],
)
def test_the_vdev_total_resource_figure_is_within_the_family_bounds(
    c_fake: CFakePlayer, family: type[ChipBackend], node: dict[str, Any], figure: float
) -> None:
    backend, found = _figure(c_fake, family, node)
    assert found == AiCoreFigure(figure, "vdev_total_resource")
    assert backend.ai_cores_in_bounds(found)


def test_the_310b1_figure_is_out_of_bounds_only_for_other_families(c_fake: CFakePlayer) -> None:
    backend, found = _figure(c_fake, Ascend310BBackend, {"chip_name": "310B1"})
    assert backend.ai_cores_in_bounds(found)
    assert not Ascend310PBackend(backend.library).ai_cores_in_bounds(found)
    assert not Ascend910Backend(backend.library).ai_cores_in_bounds(found)


def test_bounds_follow_the_overrides(c_fake: CFakePlayer) -> None:
    backend, found = _figure(c_fake, Ascend910Backend, {"chip_name": "910B3", "aicore": 18.0})
    assert not backend.ai_cores_in_bounds(found)
    widened = Ascend910Backend(
        backend.library, backend.table.with_overrides(ai_core_min=16.0, ai_core_max=None)
    )
    assert widened.ai_cores_in_bounds(found)


@pytest.mark.parametrize("vdev_error", [-8255, -8005])
def test_chip_info_aicore_cnt_when_vdev_mng_fails(c_fake: CFakePlayer, vdev_error: int) -> None:
    node = {
        "chip_name": "Ascend910",
        "npu_name": "9392",
        "aicore_cnt": 20,
        "errors": {"total_aicore": vdev_error},
    }
    backend, found = _figure(c_fake, Ascend910Backend, node)
    assert found == AiCoreFigure(20.0, "chip_info")
    assert backend.ai_cores_in_bounds(found)


def test_the_family_nominal_when_the_driver_gives_neither(c_fake: CFakePlayer) -> None:
    # Ascend 310: no VDEV_MNG resource and aicore_cnt left unfilled by the driver.
    backend, found = _figure(c_fake, Ascend310Backend, {"chip_name": "310"})
    assert found == AiCoreFigure(2.0, "family_nominal")
    assert backend.ai_cores_in_bounds(found)
