"""Log lines: one per event, JSON with stable keys for machines, key=value text for people."""

from __future__ import annotations

import json
import logging

from ascend_plugin.logs import JsonFormatter, TextFormatter


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("ascend_plugin.health", logging.WARNING, __file__, 1, message, (), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_stable_keys_and_the_context() -> None:
    record = _record("Ascend310-0 is unhealthy", device="Ascend310-0", codes=["80E01801"])
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert set(parsed) == {"ts", "level", "logger", "msg", "device", "codes"}
    assert parsed["level"] == "WARNING"
    assert parsed["logger"] == "ascend_plugin.health"
    assert parsed["msg"] == "Ascend310-0 is unhealthy"
    assert parsed["codes"] == ["80E01801"]
    assert parsed["ts"].endswith("Z")


def test_json_survives_values_json_cannot_hold() -> None:
    parsed = json.loads(JsonFormatter().format(_record("odd", value=object())))
    assert parsed["value"].startswith("<object object")


def test_text_lines_append_the_context() -> None:
    line = TextFormatter().format(_record("Ascend310-0 is unhealthy", device="Ascend310-0"))
    assert line.endswith("WARNING ascend_plugin.health: Ascend310-0 is unhealthy device=Ascend310-0")
