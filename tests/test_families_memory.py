"""Device memory per family through the binding: HBM on the 910 family, memory_info_v3 elsewhere."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.base import ChipBackend
from backends.fake import FakeScenario
from backends.families import Ascend310BBackend, Ascend310PBackend, Ascend910Backend
from backends.library import MemoryInfo


@pytest.mark.parametrize(
    ("family", "chip_name", "memory_mb"),
    [
        (Ascend910Backend, "910B3", 65536),  # memory_info_v3 answers -8255 on 910B: HBM it is
        (Ascend910Backend, "Ascend910", 65536),
        (Ascend310PBackend, "310P3", 24576),
        (Ascend310BBackend, "310B1", 4096),
    ],
)
def test_each_family_asks_the_query_its_chips_answer(
    c_fake: CFakePlayer, family: type[ChipBackend], chip_name: str, memory_mb: int
) -> None:
    node = {"chip_name": chip_name, "memory_mb": memory_mb, "chips": [{"phy_id": 0}]}
    backend = family(c_fake.open(FakeScenario.model_validate(node)))
    (chip,) = backend.discover()
    assert backend.memory(chip) == MemoryInfo(total_mb=memory_mb, used_mb=0)


def test_a_query_the_driver_does_not_support_gives_no_figure(c_fake: CFakePlayer) -> None:
    # A 910B forced into a family that asks memory_info_v3.
    backend = Ascend310PBackend(
        c_fake.open(FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]}))
    )
    (chip,) = backend.discover()
    assert backend.memory(chip) is None
