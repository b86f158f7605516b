"""``ascend-device-plugin doctor``: check a node's preconditions, and say how to fix each that fails.

Only the command-line options live here, so that building the CLI parser imports nothing of the checks
(docs/operations.md, "doctor").
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's own options (the settings flags are added beside them, as for ``run``)."""
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("/"),
        help="where the host's file system is seen: every host path checked is taken under it "
        "(default /; e.g. /host in a debug pod with the host mounted there)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people; json for scripts (keys: name, status, detail, fix, see)",
    )
