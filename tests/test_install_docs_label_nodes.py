"""Every install the docs give labels the nodes before it installs: the release runs only where the label is.

The family files select nodes by ``accelerator`` (``values-910.yaml``:
``huawei-Ascend910``); a node without it never gets the plugin's pod, so the
install steps of each family, in docs/deployment.md and in the README, say to
set the label the family's file selects, before ``helm install``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from chart_harness import load_values_file

ROOT = Path(__file__).resolve().parents[1]


def section(path: str, heading: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize(
    ("path", "heading", "values_file"),
    [
        ("docs/deployment.md", "## Install on a 310B edge node", "values-310b.yaml"),
        ("docs/deployment.md", "## Install on a 910B server", "values-910.yaml"),
        ("README.md", "**A 310B edge node", "values-310b.yaml"),
        ("README.md", "**A 910B server**", "values-910.yaml"),
    ],
)
def test_the_install_labels_the_node_its_family_file_selects_first(
    path: str, heading: str, values_file: str
) -> None:
    steps = section(path, heading)
    label = load_values_file(values_file)["nodeSelector"]["accelerator"]
    command = f"kubectl label node <node> accelerator={label}"
    assert command in steps, f"{path} {heading}: no `{command}`"
    install = re.search(
        rf"helm install .*\n?.*-f charts/ascend-device-plugin/{re.escape(values_file)}", steps
    )
    assert install is not None
    assert steps.index(command) < install.start(), "the label comes before the install"
