"""The command line: boolean flags take a value too, and a mistake is one short message."""

from __future__ import annotations

import pytest

from ascend_plugin.cli import EXIT_BAD_SETTINGS, build_parser, main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--hot-reset"], True),
        (["--hot-reset=true"], True),
        (["--hot-reset=True"], True),
        (["--hot-reset", "yes"], True),
        (["--hot-reset=on"], True),
        (["--hot-reset=false"], False),
        (["--hot-reset", "no"], False),
        (["--hot-reset=off"], False),
        (["--no-hot-reset"], False),
        ([], None),
    ],
    ids=str,
)
def test_a_boolean_flag_takes_true_or_false(argv: list[str], expected: bool | None) -> None:
    assert build_parser().parse_args(["run", *argv]).hot_reset is expected


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_a_bad_value_is_two_lines_naming_the_value_not_the_usage(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main([command, "--volcano=maybe"])
    assert refused.value.code == EXIT_BAD_SETTINGS
    error = capsys.readouterr().err
    assert error.splitlines() == [
        f"ascend-device-plugin {command}: error: argument --volcano/--no-volcano: got 'maybe': "
        "true or false (or yes, no, on, off)",
        f"(`ascend-device-plugin {command} --help` lists every flag)",
    ]


def test_huaweis_numeric_hot_reset_is_translated_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    """Huawei's -hotReset=0 turns hot reset ON: reading 0 as false would be the wrong way round."""
    with pytest.raises(SystemExit):
        main(["run", "--hot-reset=0"])
    error = capsys.readouterr().err
    assert "got '0'" in error
    assert "Huawei's -hotReset=0 and -hotReset=2 are --hot-reset here" in error
    assert "-hotReset=-1 is --no-hot-reset" in error


def test_the_negative_flag_takes_no_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--no-hot-reset=true"])
    assert "--no-hot-reset takes no value" in capsys.readouterr().err


def test_an_unknown_flag_is_short_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["run", "--volcanoType=true"])
    assert refused.value.code == EXIT_BAD_SETTINGS
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert "unrecognized arguments: --volcanoType=true" in lines[0]
