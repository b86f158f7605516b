"""AI-core figures through the binding: VDEV_MNG's float first, then chip info, then the family's nominal.

Huawei's plugin reads the same float and checks it against one range for
every chip, [8, 36], which is how a healthy 310B1 (1.0) took the plugin down.
Here each family has its own bounds.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import backend_of

from backends.chips import AiCoreFigure
from backends.fake import FakeScenario
from backends.families import ASCEND_310, ASCEND_310B, ASCEND_310P, ASCEND_910, FamilyTable


def _figure(c_fake: CFakePlayer, family: FamilyTable, node: dict[str, Any]) -> AiCoreFigure:
    backend = backend_of(c_fake.open(FakeScenario.model_validate({**node, "chips": [{"phy_id": 0}]})), family)
    (chip,) = backend.session.discover()
    return backend.ai_cores(chip)


@pytest.mark.parametrize(
    ("family", "node", "figure"),
    [
        (ASCEND_310B, {"chip_name": "310B1"}, 1.0),
        (ASCEND_310B, {"chip_name": "310B4"}, 1.0),
        (ASCEND_310P, {"chip_name": "310P3"}, 8.0),
        (ASCEND_310P, {"chip_name": "310P1", "aicore": 10.0}, 10.0),
        (ASCEND_910, {"chip_name": "910B2"}, 24.0),
        (ASCEND_910, {"chip_name": "910B3"}, 20.0),
        (ASCEND_910, {"chip_name": "910A", "aicore": 30.0}, 30.0),
        (ASCEND_910, {"chip_name": "Ascend910", "npu_name": "9391", "aicore": 24.0}, 24.0),
    ],
)
def test_the_vdev_total_resource_figure_is_within_the_family_bounds(
    c_fake: CFakePlayer, family: FamilyTable, node: dict[str, Any], figure: float
) -> None:
    found = _figure(c_fake, family, node)
    assert found == AiCoreFigure(figure, "vdev_total_resource")
    assert family.ai_cores_in_bounds(found.value)


def test_the_310b1_figure_is_out_of_bounds_only_for_other_families(c_fake: CFakePlayer) -> None:
    found = _figure(c_fake, ASCEND_310B, {"chip_name": "310B1"})
    assert ASCEND_310B.ai_cores_in_bounds(found.value)
    assert not ASCEND_310P.ai_cores_in_bounds(found.value)
    assert not ASCEND_910.ai_cores_in_bounds(found.value)


def test_bounds_follow_the_overrides(c_fake: CFakePlayer) -> None:
    found = _figure(c_fake, ASCEND_910, {"chip_name": "910B3", "aicore": 18.0})
    assert not ASCEND_910.ai_cores_in_bounds(found.value)
    widened = ASCEND_910.with_overrides(ai_core_min=16.0, ai_core_max=None)
    assert widened.ai_cores_in_bounds(found.value)


@pytest.mark.parametrize("vdev_error", [-8255, -8005])
def test_chip_info_aicore_cnt_when_vdev_mng_fails(c_fake: CFakePlayer, vdev_error: int) -> None:
    node = {
        "chip_name": "Ascend910",
        "npu_name": "9392",
        "aicore_cnt": 20,
        "errors": {"total_aicore": vdev_error},
    }
    found = _figure(c_fake, ASCEND_910, node)
    assert found == AiCoreFigure(20.0, "chip_info")
    assert ASCEND_910.ai_cores_in_bounds(found.value)


def test_the_family_nominal_when_the_driver_gives_neither(c_fake: CFakePlayer) -> None:
    # Ascend 310: no VDEV_MNG resource and aicore_cnt left unfilled by the driver.
    found = _figure(c_fake, ASCEND_310, {"chip_name": "310"})
    assert found == AiCoreFigure(2.0, "family_nominal")
    assert ASCEND_310.ai_cores_in_bounds(found.value)
