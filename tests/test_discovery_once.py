"""The chips are found once per process: a part restarted by its supervisor asks discovery again and gets
the node found before, its library session still open, instead of a second dcmi_init beside the first."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer

from ascend_plugin.chip_calls import NODE, ChipCalls
from ascend_plugin.inventory.discovery import Discovery, DiscoverySettings
from backends.fake import FakeScenario
from backends.library import DeviceLibrary

pytestmark = pytest.mark.anyio


async def test_asked_again_discovery_returns_the_node_it_found_and_opens_no_second_library(
    any_fake: ScenarioPlayer[Any], calls: ChipCalls
) -> None:
    any_fake.update(
        FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}, {"phy_id": 1}]})
    )
    opened: list[DeviceLibrary] = []

    def open_library() -> DeviceLibrary:
        library = any_fake.open(init=False)
        opened.append(library)
        return library

    discovery = Discovery(DiscoverySettings(open_library, None, {}), calls)
    assert discovery.node is None
    node = await discovery.run()
    assert await discovery.run() is node
    assert discovery.node is node
    assert len(opened) == 1, "one library session for the life of the process"
    assert [state.phy_id for state in node.inventory.chips()] == [0, 1]
    assert await calls.call(NODE, "card list", node.backend.library.card_list) == [0, 1], "still initialised"
    await calls.call(NODE, "close", node.backend.close)
