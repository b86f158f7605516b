"""The prepared-claims checkpoint file: what it holds, written atomically, read back, refused when broken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_plugin.faces.dra.checkpoint import (
    Checkpoint,
    CheckpointError,
    PreparedClaim,
    PreparedDevice,
    parse,
    render,
)
from ascend_plugin.faces.dra.claims import ClaimRef

CLAIM = PreparedClaim(
    ClaimRef("default", "train", "uid-1"),
    "npu-node-1",
    (
        PreparedDevice("npu-0", ("npus",), ("huawei.com/npu=uid-1-npu-0",)),
        PreparedDevice("npu-1", ("npus", "monitor"), ("huawei.com/npu=uid-1-npu-1",), admin_access=True),
    ),
)


def test_what_is_written_is_read_back(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "plugin" / "checkpoint.json")
    checkpoint.save({"uid-1": CLAIM})
    assert checkpoint.load() == {"uid-1": CLAIM}
    assert [path.name for path in checkpoint.path.parent.iterdir()] == ["checkpoint.json"], (
        "no temporary left"
    )


def test_no_file_is_no_claim(tmp_path: Path) -> None:
    assert Checkpoint(tmp_path / "checkpoint.json").load() == {}


def test_the_format_is_versioned_and_sorted() -> None:
    data = json.loads(render({"uid-2": CLAIM, "uid-1": CLAIM}))
    assert data["format"] == 2
    assert list(data["claims"]) == ["uid-1", "uid-2"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not JSON"),
        ('{"claims": {}}', "not a checkpoint of format 1 or 2"),
        ('{"format": 1, "claims": []}', "claims must be an object of claims by UID"),
        (
            '{"format": 1, "claims": {"u": {"namespace": "d", "name": "n", "pool": "p"}}}',
            "claim u.devices must be a list",
        ),
        (
            '{"format": 1, "claims": {"u": {"namespace": "d", "name": "n", "pool": "p", '
            '"devices": [{"device": 3}]}}}',
            r"claim u.devices\[0\].device must be a string, got 3",
        ),
        (
            '{"format": 1, "claims": {"u": {"namespace": "d", "pool": "p", "devices": []}}}',
            "claim u.name must be a string, got None",
        ),
    ],
)
def test_a_broken_checkpoint_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(CheckpointError, match=problem):
        parse(text)
