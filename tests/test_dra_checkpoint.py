"""The prepared-claims checkpoint file: what it holds, written atomically, read back, refused when broken."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from log_records import records

from ascend_plugin.faces.dra.checkpoint import (
    Checkpoint,
    CheckpointError,
    ClaimRef,
    PreparedClaim,
    PreparedDevice,
    parse,
    render,
)
from ascend_plugin.path_facts import PathUnusable

CHECKPOINT = "ascend_plugin.faces.dra.checkpoint"

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


def test_vnpus_shares_and_states_are_written_down_and_read_back(tmp_path: Path) -> None:
    from ascend_plugin.faces.dra.checkpoint import PREPARING, OwnedVnpu

    claim = PreparedClaim(
        ClaimRef("default", "infer", "uid-2"),
        "npu-node-1",
        (
            PreparedDevice("npu-0-vir04-0", ("vnpu",), (), vnpu=OwnedVnpu(0, "vir04")),
            PreparedDevice("npu-1", ("share",), ("huawei.com/npu=uid-2-npu-1",), share_id="9b1d-share"),
        ),
        PREPARING,
    )
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.save({"uid-2": claim})
    assert checkpoint.load() == {"uid-2": claim}
    entry = json.loads(checkpoint.path.read_text())["claims"]["uid-2"]
    assert entry["state"] == "preparing"
    assert entry["devices"][0]["vnpu"] == {"chip": 0, "template": "vir04", "id": None}
    assert entry["devices"][1]["shareID"] == "9b1d-share"


def test_a_checkpoint_of_format_1_is_read_as_prepared_claims() -> None:
    text = json.dumps(
        {
            "format": 1,
            "claims": {
                "uid-1": {
                    "namespace": "default",
                    "name": "train",
                    "pool": "npu-node-1",
                    "devices": [
                        {
                            "device": "npu-0",
                            "requests": ["npus"],
                            "cdiDeviceIDs": ["huawei.com/npu=uid-1-npu-0"],
                        }
                    ],
                }
            },
        }
    )
    (claim,) = parse(text).values()
    assert claim.state == "prepared"
    assert claim.devices[0].vnpu is None


@pytest.mark.parametrize(
    ("device", "problem"),
    [
        ({"vnpu": {"chip": "0", "template": "vir04"}}, "vnpu.chip must be a physical id"),
        ({"vnpu": {"chip": 0, "template": "vir04", "id": "100"}}, "vnpu.id must be a vNPU id or null"),
        ({"vnpu": {"chip": 0}}, "vnpu.template must be a string"),
        ({"shareID": 7}, "shareID must be a string"),
    ],
)
def test_a_bad_vnpu_or_share_entry_says_what_is_wrong(device: dict[str, object], problem: str) -> None:
    entry = {"device": "npu-0", "requests": [], "cdiDeviceIDs": [], **device}
    text = json.dumps(
        {"format": 2, "claims": {"u": {"namespace": "d", "name": "n", "pool": "p", "devices": [entry]}}}
    )
    with pytest.raises(CheckpointError, match=problem):
        parse(text)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (
            lambda path: path.write_bytes(b'{"format": 1, "claims": {"\xff": {}}}'),
            "not UTF-8 text (byte 26 is 0xff)",
        ),
        (lambda path: path.mkdir(), "not a regular file but a directory"),
        (os.mkfifo, "not a regular file but a named pipe"),
        (lambda path: path.write_text("[" * 100_000), "not JSON this plugin can read: nested too deeply"),
        (
            lambda path: path.write_text('{"format": 1, "claims": {"u": 7}}'),
            "claim u must be an object, got 7",
        ),
        (lambda path: path.symlink_to(path), "a symbolic link that leads nowhere (a loop)"),
    ],
    ids=["not-utf8", "directory", "fifo", "deep", "wrong-shape", "link-loop"],
)
def test_whatever_cannot_be_decoded_is_moved_aside_and_nothing_is_lost(
    tmp_path: Path, make: Callable[[Path], object], problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    make(checkpoint.path)
    assert checkpoint.load() == {}
    (aside,) = tmp_path.glob("checkpoint.json.bad-*")
    assert not checkpoint.path.exists()
    (record,) = records(caplog, CHECKPOINT, level=logging.ERROR, checkpoint=str(checkpoint.path))
    assert record.problem == problem  # type: ignore[attr-defined]
    assert record.moved_to == str(aside)  # type: ignore[attr-defined]
    checkpoint.save({"uid-1": CLAIM})
    assert checkpoint.load() == {"uid-1": CLAIM}, "the next checkpoint is written where it belongs"


def test_a_second_bad_checkpoint_in_the_same_second_goes_beside_the_first(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.path.mkdir()
    checkpoint.load()
    checkpoint.path.mkdir()
    (checkpoint.path / "x").write_text("")
    checkpoint.load()
    assert len(list(tmp_path.glob("checkpoint.json.bad-*"))) == 2


def test_a_checkpoint_that_cannot_be_read_is_left_where_it_is(tmp_path: Path) -> None:
    """An I/O error may pass (the file may be fine once the disk answers): nothing moves, the start fails."""
    failing = tmp_path / "checkpoint.json"
    failing.symlink_to("/proc/self/mem")  # a regular file whose read fails with EIO, for root too
    with pytest.raises(PathUnusable) as raised:
        Checkpoint(failing).load()
    assert str(raised.value) == f"cannot read the prepared-claims checkpoint {failing}: Input/output error"
    assert failing.is_symlink()
    assert list(tmp_path.iterdir()) == [failing]


def test_a_temporary_file_a_crash_left_half_written_is_removed_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.save({"uid-1": CLAIM})
    checkpoint.temporary.write_text('{"format": 2, "cla')  # the write that a crash cut short
    assert checkpoint.load() == {"uid-1": CLAIM}
    assert not checkpoint.temporary.exists()
    (said,) = records(caplog, CHECKPOINT, level=logging.WARNING, checkpoint=str(checkpoint.path))
    assert str(checkpoint.temporary) in said.getMessage()
    assert checkpoint.temporary == tmp_path / ".checkpoint.json.tmp", "where files.write_atomically writes"


def test_a_directory_where_the_temporary_file_goes_is_not_ours_to_remove(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.temporary.mkdir()
    (checkpoint.temporary / "kept").write_text("")
    assert checkpoint.load() == {}
    assert (checkpoint.temporary / "kept").exists()


def test_a_claim_rebuilt_from_its_spec_is_written_down_as_such() -> None:
    rebuilt = PreparedClaim(
        ClaimRef.of_uid("uid-9"),
        "npu-node-1",
        (PreparedDevice("npu-2", (), ("huawei.com/npu=uid-9-npu-2",)),),
        recovered=True,
    )
    text = render({"uid-9": rebuilt})
    assert json.loads(text)["claims"]["uid-9"]["recovered"] is True
    assert parse(text) == {"uid-9": rebuilt}
    assert "recovered" not in json.loads(render({"uid-1": CLAIM}))["claims"]["uid-1"]
