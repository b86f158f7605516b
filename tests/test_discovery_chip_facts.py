"""Discovery gathers each chip's device memory and PCIe address, on both fakes, whatever the driver lacks."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from node_harness import discovered

from ascend_plugin.chip_calls import ChipCalls
from backends.library import PcieAddress


@pytest.mark.anyio
async def test_hbm_and_pcie_of_a_training_server(any_fake: ScenarioPlayer[Any], calls: ChipCalls) -> None:
    """910B drivers refuse memory_info_v3: the figure comes from the HBM query."""
    scenario = {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "chips": [
            {"phy_id": 0, "card_id": 0, "pcie": "0000:c1:00.0"},
            {"phy_id": 1, "card_id": 1, "pcie": "0000:81:00.0", "memory_mb": 32768},
        ],
    }
    inventory = await discovered(any_fake, calls, scenario)
    assert [state.memory_mb for state in inventory.chips()] == [65536, 32768]
    assert [state.pcie_address for state in inventory.chips()] == [
        PcieAddress(0, 0xC1, 0, 0),
        PcieAddress(0, 0x81, 0, 0),
    ]


@pytest.mark.anyio
async def test_a_soc_board_has_memory_but_no_pcie_address(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls
) -> None:
    scenario = {"chip_name": "310B1", "memory_mb": 4096, "chips": [{"phy_id": 0}]}
    inventory = await discovered(any_fake, calls, scenario)
    state = inventory.chips()[0]
    assert (state.memory_mb, state.pcie_address, state.numa_node) == (4096, None, None)


@pytest.mark.anyio
async def test_without_the_hbm_query_memory_info_answers(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls
) -> None:
    scenario = {"chip_name": "310P3", "memory_mb": 24576, "missing": ["hbm_info"], "chips": [{"phy_id": 0}]}
    inventory = await discovered(any_fake, calls, scenario)
    assert inventory.chips()[0].memory_mb == 24576
    assert "dcmi_get_device_hbm_info" in inventory.facts.missing_functions


@pytest.mark.anyio
async def test_a_driver_that_answers_neither_leaves_the_memory_unknown(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls
) -> None:
    scenario = {
        "chip_name": "910B3",
        "chips": [{"phy_id": 0, "errors": {"hbm_info": -8020}}, {"phy_id": 1}],
    }
    inventory = await discovered(any_fake, calls, scenario)
    assert [state.memory_mb for state in inventory.chips()] == [None, 8192]
