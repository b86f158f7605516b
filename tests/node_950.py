"""The Ascend 950 node the tests serve: the demo's Atlas 850, eight 950PR whose logical ids differ.

Chip ``phy`` has logical id ``logic_of(phy)`` (four off), so a call that names
a chip by the wrong id answers for another chip, and a test sees it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascend_plugin.testing.simulate_950 import CHIPS, RESOURCE, atlas_850, logic_of, prepare_host
from backends.fake import FakeScenario

__all__ = ["CHIPS", "RESOURCE", "host", "logic_of", "node_950"]


def node_950(chips: dict[int, dict[str, Any]] | None = None, **top: Any) -> FakeScenario:
    """The Atlas 850; ``chips``: more fields per physical id; ``top``: the node's."""
    return FakeScenario.model_validate(atlas_850(chips) | top)


def host(root: Path) -> Path:
    """An Atlas 850 host under ``root``: /dev (with the UB nodes), NUMA nodes, the driver directory."""
    prepare_host(root)
    return root
