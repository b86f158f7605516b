"""An operator's path through the docs: install, migrate, move a node to DRA, scrape; each two clicks away.

Links are followed as GitHub renders them: a relative link opens a file, a
``#fragment`` the heading whose slug it is. From the README, each step's section
is reached in at most two clicks, and every relative link of the operator's
pages lands on a file and heading that exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "README.md",
    *(f"docs/{name}" for name in ("deployment.md", "migration.md", "dra.md", "telemetry.md", "volcano.md")),
]
STEPS = {
    "install": "docs/deployment.md#install-on-a-910b-server",
    "migrate from Huawei's plugin": "docs/migration.md",  # the whole page
    "move a node to DRA": "docs/dra.md#moving-a-node-from-the-device-plugin-to-dra",
    "scrape with any Prometheus": "docs/telemetry.md#prometheus-and-grafana",
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: str) -> set[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def links(page: str) -> list[str]:
    """Every relative link of ``page``, as ``path#fragment`` from the repository's root."""
    text = re.sub(r"```.*?```", "", (ROOT / page).read_text(encoding="utf-8"), flags=re.DOTALL)
    found = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        resolved = (ROOT / page).parent / path if path else ROOT / page
        relative = resolved.resolve().relative_to(ROOT).as_posix()
        found.append(f"{relative}#{fragment}" if fragment else relative)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_lands(page: str) -> None:
    def lands(link: str) -> bool:
        path, _, fragment = link.partition("#")
        if not (ROOT / path).exists():
            return False
        return not fragment or not path.endswith(".md") or fragment in anchors(path)

    assert [link for link in links(page) if not lands(link)] == []


@pytest.mark.parametrize(("step", "target"), STEPS.items(), ids=list(STEPS))
def test_each_step_is_two_clicks_from_the_readme(step: str, target: str) -> None:
    page, _, fragment = target.partition("#")
    assert not fragment or fragment in anchors(page), f"{target} is no heading"
    reached = {"README.md"}
    frontier = {"README.md"}
    for _ in range(2):
        frontier = {
            link
            for current in frontier
            if current.partition("#")[0].endswith(".md")
            for link in links(current.partition("#")[0])
        }
        reached |= frontier
        if target in reached:
            break
    assert target in reached, f"{step}: {target} is more than two clicks from the README"
