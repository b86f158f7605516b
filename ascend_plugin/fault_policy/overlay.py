"""The plugin's own fault-level format: level name -> codes, laid over Huawei's lists.

``{"SeparateNPU": ["80E01801"], "NotHandleFault": ["80CB8009"]}`` moves each
code to the list of its level and leaves every other code where Huawei's
``faultCode.json`` in force puts it. It exists beside Huawei's format because
it says only what differs: an operator changes two codes without keeping a copy
of Huawei's eight hundred in step with each driver release. Keys starting with
``_`` are comments. Unlike Huawei's lenient lists it is checked strictly (an
unknown level or a bad code refuses the whole file), since it is short and
written by hand.

Two levels have no list of their own: NormalNPU reads as NotHandleFault (the
code is ignored), and ManuallySeparateNPU becomes what Huawei offers for it, a
FaultFrequency entry with Times 1: the first occurrence separates the chip until
an operator removes it from the ManuallySeparateNPU key.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ascend_plugin.fault_policy.codes import parse_code
from ascend_plugin.fault_policy.customization import NEVER, TIME_WINDOW, FaultCustomization, FrequencyRule
from ascend_plugin.fault_policy.fault_codes import FaultCodeLists
from ascend_plugin.fault_policy.levels import FaultLevel
from ascend_plugin.fault_policy.problems import FaultConfigError
from ascend_plugin.settings import shown

MAX_OVERLAY_CODE = 0xFFFFFFFFF  # nine hex digits, the longest codes Huawei ships


def decode_overlay(data: object, source: str) -> dict[int, FaultLevel]:
    """``{"LevelName": ["80E01801", ...], ...}`` -> {code: level}; FaultConfigError naming what is wrong."""
    if not isinstance(data, dict):
        raise FaultConfigError(f"{source}: expected an object of level -> list of hex codes")
    allowed = ", ".join(level.name for level in FaultLevel)
    result: dict[int, FaultLevel] = {}
    for name, codes in data.items():
        if name.startswith("_"):
            continue
        if name not in FaultLevel.__members__:
            raise FaultConfigError(f"{source}: unknown fault level {shown(name)}; allowed: {allowed}")
        if not isinstance(codes, list):
            raise FaultConfigError(
                f"{source}: {name} must be a list of hex codes, not {type(codes).__name__}"
            )
        for text in codes:
            spelled = str(text)
            code = parse_code(spelled[2:] if spelled[:2].lower() == "0x" else spelled)
            if code is None:
                raise FaultConfigError(
                    f"{source}: {name}: {shown(text)} is not a hex fault code like '80E01801'"
                )
            if code > MAX_OVERLAY_CODE:
                raise FaultConfigError(f"{source}: {name}: {shown(text)} is out of range")
            result[code] = FaultLevel[name]
    return result


def apply_overlay(
    codes: FaultCodeLists, customization: FaultCustomization, overlay: Mapping[int, FaultLevel]
) -> tuple[FaultCodeLists, FaultCustomization]:
    """The lists and customization in force once ``overlay`` is laid over them."""
    manual = [code for code, level in overlay.items() if level is FaultLevel.ManuallySeparateNPU]
    listed = {
        code: {
            FaultLevel.NormalNPU: FaultLevel.NotHandleFault,
            FaultLevel.ManuallySeparateNPU: FaultLevel.SeparateNPU,
        }.get(level, level)
        for code, level in overlay.items()
    }
    first_occurrence = FrequencyRule(TIME_WINDOW[0], 1, FaultLevel.ManuallySeparateNPU, NEVER)
    rules = MappingProxyType(dict.fromkeys(manual, first_occurrence))
    return codes.with_overlay(listed), customization.with_frequency(rules) if rules else customization
