"""The telemetry, hot-reset, super-pod and vNPU calls answer alike on the Python fake and the C fake.

Every call is asked of every chip with every DCMI type it takes (and one no
driver knows), errors included, on nodes of each family; then the same
sequence of vNPU creations and destructions and the same reset are played on
both, and every answer compared. The C fake answers through the real cffi
binding, so this also checks that the binding decodes what the fake wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, PythonFakePlayer

from backends.errors import DcmiError, SymbolMissing
from backends.fake import FakeScenario
from backends.library import (
    ALL_VDEVS,
    DeviceLibrary,
    DieType,
    EccDeviceType,
    FrequencyType,
    ResetChannel,
    UtilizationType,
)

UNKNOWN_TYPE = 11  # in no DCMI enum these calls take

NODES: dict[str, dict[str, Any]] = {
    "atlas-200i-a2": {
        "chip_name": "310B1",
        "memory_mb": 4096,
        "telemetry": {"temperature_c": 52, "utilization_pct": {"aicore": 17, "hbm": 3}},
        "chips": [{"phy_id": 0, "processes": [{"pid": 4242, "memory_bytes": 1 << 28}]}],
    },
    "atlas-300i-duo": {
        "chip_name": "310P3",
        "memory_mb": 24576,
        "telemetry": {"power_w": 42.5, "voltage_v": 0.83},
        "chips": [
            {
                "phy_id": 0,
                "card_id": 2,
                "telemetry": {"board_power_w": 91.3, "memory_used_mb": 3000},
                "vdevs": [{"vdev_id": 100, "template": "vir02", "memory_mb": 6144}],
                "vdev_usage": {"100": {"in_use": True, "aicore_utilization": 60, "memory_used_mb": 2048}},
            },
            {"phy_id": 1, "card_id": 2, "errors": {"temperature": -8255}},
        ],
    },
    "atlas-300i-310": {
        "chip_name": "310",
        "aicore_cnt": 2,
        "chips": [{"phy_id": p, "card_id": 5} for p in range(4)],
    },
    "910b-server": {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "telemetry": {
            "utilization_pct": {"aicore": 71, "vectorcore": 33, "aicube": 64, "npu": 70, "hbm": 41},
            "hbm_temperature_c": 48,
            "hbm_bandwidth_pct": 12,
            "memory_used_mb": 30000,
            "ecc": {"hbm": {"single_bit_error_cnt": 3, "total_single_bit_error_cnt": 9}},
        },
        "chips": [
            {"phy_id": 0, "card_id": 1, "outband_channel": 1, "telemetry": {"network_health": 3}},
            {"phy_id": 1, "card_id": 2, "vdie_id": "00000A01-DEADBEEF-0-0-1", "hang": []},
        ],
    },
    "910a": {
        "chip_name": "910A",
        "memory_mb": 32768,
        "aicore": 30.0,
        "chips": [{"phy_id": n, "card_id": n} for n in range(2)],
    },
    "a3": {
        "chip_name": "Ascend910",
        "npu_name": "9391",
        "memory_mb": 65536,
        "aicore": 24.0,
        "super_pod": {"super_pod_id": 7, "server_id": 3, "scale_type": 1},
        "chips": [
            {"phy_id": 0, "card_id": 0},
            {"phy_id": 1, "card_id": 0},
            {"phy_id": 2, "card_id": 9, "brother_card": 11},
            {"phy_id": 3, "card_id": 10},
        ],
    },
    "a3-standalone": {
        "chip_name": "Ascend910",
        "aicore": 20.0,
        "chips": [{"phy_id": 0, "card_id": 4}],
    },
}


def _answer(call: Callable[..., Any], *args: Any) -> object:
    try:
        return call(*args)
    except DcmiError as error:
        return (type(error).__name__, error.function, error.code)
    except SymbolMissing as error:
        return ("SymbolMissing", error.function)


def _readings(library: DeviceLibrary, card: int, device: int) -> dict[str, object]:
    """Everything a chip reports about itself, every type of every typed call."""
    answers: dict[str, object] = {}
    for call in (
        library.temperature,
        library.power,
        library.voltage,
        library.multi_utilization,
        library.hbm_info,
        library.memory_info,
        library.network_health,
        library.processes,
        library.boot_status,
        library.brother_card,
        library.outband_channel_state,
        library.super_pod_info,
        library.vdev_ids,
    ):
        answers[call.__name__] = _answer(call, card, device)
    typed: tuple[tuple[Callable[..., Any], list[int]], ...] = (
        (library.frequency, [*FrequencyType, UNKNOWN_TYPE]),
        (library.utilization, [*UtilizationType, UNKNOWN_TYPE]),
        (library.ecc_info, [*EccDeviceType, UNKNOWN_TYPE]),
        (library.die_id, [*DieType, UNKNOWN_TYPE]),
        (library.multi_utilization_period, [0, 1, 4, 5]),
    )
    for call, kinds in typed:
        for kind in kinds:
            answers[f"{call.__name__} {int(kind)}"] = _answer(call, card, device, kind)
    ids = answers["vdev_ids"]
    for vdev in [*ids, 1123] if isinstance(ids, list) else [100]:
        answers[f"vdev {vdev}"] = _answer(library.vdev_activity, card, device, vdev)
    return answers


def _everything(library: DeviceLibrary) -> dict[str, object]:
    answers: dict[str, object] = {}
    for card in library.card_list():
        answers[f"{card} board power"] = _answer(library.board_power, card)
        for device in range(library.device_count(card)):
            answers |= {
                f"{card}/{device} {key}": value for key, value in _readings(library, card, device).items()
            }
    answers["unknown card board power"] = _answer(library.board_power, 999)
    answers["unknown chip temperature"] = _answer(library.temperature, 999, 0)
    return answers


@pytest.mark.parametrize("node", NODES.values(), ids=NODES.keys())
def test_both_fakes_report_alike(
    node: dict[str, Any], python_fake: PythonFakePlayer, c_fake: CFakePlayer
) -> None:
    scenario = FakeScenario.model_validate(node)
    assert _everything(c_fake.open(scenario)) == _everything(python_fake.open(scenario))


def _vnpu_story(library: DeviceLibrary, card: int, templates: list[str]) -> list[object]:
    """Fill a chip with vNPUs until it refuses, destroy some, fill again; every answer on the way."""
    story: list[object] = []
    for template in [*templates, "vir99", templates[0]]:
        story.append((template, _answer(library.create_vdev, card, 0, template)))
    ids = library.vdev_ids(card, 0)
    story.append(("ids", ids))
    story += [("info", _answer(library.vdev_info, card, 0, vdev)) for vdev in ids]
    story.append(("destroy first", _answer(library.destroy_vdev, card, 0, ids[0])))
    story.append(("destroy again", _answer(library.destroy_vdev, card, 0, ids[0])))
    story.append(("create at a taken id", _answer(library.create_vdev, card, 0, templates[-1], ids[-1])))
    story.append(("create outside the range", _answer(library.create_vdev, card, 0, templates[-1], 99)))
    story.append(("refill", _answer(library.create_vdev, card, 0, templates[0])))
    story.append(("ids after", library.vdev_ids(card, 0)))
    story.append(("destroy all", _answer(library.destroy_vdev, card, 0, ALL_VDEVS)))
    story.append(("ids at the end", library.vdev_ids(card, 0)))
    return story


SPLITS = {
    "310p-sevens": ("310P3", 24576, None, ["vir01"] * 7),
    "310p-halves": ("310P3", 24576, None, ["vir04", "vir04", "vir04_3c"]),
    "310p-media": ("310P3", 24576, None, ["vir04_4c_dvpp", "vir02_1c", "vir04_3c_ndvpp"]),
    "910a-30": ("910A", 32768, 30.0, ["vir16", "vir16", "vir08", "vir04", "vir02"]),
    "910b3": ("910B3", 65536, 20.0, ["vir10_3c_32g", "vir05_1c_16g", "vir05_1c_16g", "vir05_1c_16g"]),
    "910b4": ("910B4", 32768, 20.0, ["vir10_4c_16g_m", "vir10_3c_16g_nm", "vir05_1c_8g"]),
    "a3": ("Ascend910", 65536, 24.0, ["vir12_3c_32g", "vir06_1c_16g", "vir06_1c_16g"]),
}


@pytest.mark.parametrize(("chip_name", "memory", "aicore", "templates"), SPLITS.values(), ids=SPLITS.keys())
def test_both_fakes_split_chips_alike(
    chip_name: str,
    memory: int,
    aicore: float | None,
    templates: list[str],
    python_fake: PythonFakePlayer,
    c_fake: CFakePlayer,
) -> None:
    node = {"chip_name": chip_name, "memory_mb": memory, "chips": [{"phy_id": 2, "card_id": 3}]}
    scenario = FakeScenario.model_validate(node | ({"aicore": aicore} if aicore else {}))
    stories = [_vnpu_story(player.open(scenario), 3, templates) for player in (c_fake, python_fake)]
    assert stories[0] == stories[1]


def test_both_fakes_reset_alike(python_fake: PythonFakePlayer, c_fake: CFakePlayer) -> None:
    # A zero-length reset: the answers after it do not depend on how fast the test runs.
    scenario = FakeScenario.model_validate(
        {
            "chip_name": "310P3",
            "reset_seconds": 0,
            "chips": [
                {"phy_id": 0, "card_id": 0, "health": 2, "fault_codes": ["80E01801"]},
                {"phy_id": 1, "card_id": 0, "health": 1, "fault_codes": ["80C98006"]},
                {
                    "phy_id": 2,
                    "card_id": 1,
                    "health": 3,
                    "fault_codes": ["40F84E00"],
                    "reset_clears_faults": False,
                },
            ],
        }
    )
    stories = []
    for player in (c_fake, python_fake):
        library = player.open(scenario)
        story: list[object] = [
            _answer(library.reset, 0, 1, ResetChannel.INBAND),
            _answer(library.reset, 1, 0, ResetChannel.OUTBAND),
            _answer(library.reset, 1, 0, 7),
            _answer(library.reset, 0, 0, ResetChannel.INBAND),
            _answer(library.reset, 1, 0, ResetChannel.INBAND),
        ]
        for card, device in ((0, 0), (0, 1), (1, 0)):
            story += [
                library.boot_status(card, device),
                library.health(card, device),
                library.error_codes(card, device),
            ]
        stories.append(story)
    assert stories[0] == stories[1]
