"""The docs name every setting, and the README carries the two set-up commands CI relies on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_plugin.settings import Settings, flag_name

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_in_the_configuration_table(field: str) -> None:
    assert f"`{flag_name(field)}" in CONFIGURATION


def test_ci_runs_the_readmes_test_command() -> None:
    """The README's second command is a line of .ci/run, to the letter."""
    (command,) = re.findall(r"^python3 -m pip install nox && .*$", README, re.MULTILINE)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci


def test_the_install_section_names_every_build_knob_of_the_dockerfile() -> None:
    """Building behind a mirror or proxy: each build argument and the CA secret are explained."""
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    knobs = set(re.findall(r"^ARG (\w+)", dockerfile, re.MULTILINE)) - {"PYTHON_VERSION"}
    knobs |= {f"id={secret}" for secret in re.findall(r"type=secret,id=([\w-]+)", dockerfile)}
    install = README.split("## Install on a cluster", 1)[1].split("\n## ", 1)[0]
    assert knobs == {"BASE_REGISTRY", "BASE_IMAGE", "PIP_INDEX_URL", "id=ca-bundle"}
    assert [knob for knob in sorted(knobs) if knob not in install] == []
