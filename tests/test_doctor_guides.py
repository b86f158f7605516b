"""Every docs section a doctor finding points to exists, under the anchor the finding names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_plugin.doctor.findings import Guide

ROOT = Path(__file__).resolve().parent.parent


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown renderer (GitHub's rules) gives the page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("guide", list(Guide))
def test_the_guide_names_a_heading_of_its_page(guide: Guide) -> None:
    page, anchor = guide.value.split("#")
    assert anchor in anchors(ROOT / page)
