"""Writing a fake node's scenario file, as the demos change the node under a running plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_scenario(path: Path, scenario: dict[str, Any]) -> None:
    """Replace the scenario file atomically: the plugin never reads half a file."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(scenario), encoding="utf-8")
    temporary.replace(path)
