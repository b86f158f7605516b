"""A node described once answers the same on the pure-Python fake and on the C fake through the binding.

That is what lets every other test pick either fake: the C fake exercises the
real cffi binding, the Python fake is quick to drive, and neither drifts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, PythonFakePlayer

from backends.errors import DcmiError, SymbolMissing
from backends.fake import FakeScenario
from backends.library import DeviceLibrary

# Where Atlas 800T A2 servers put their eight 910B NPUs: two under each of four root ports' switches.
_A2_BUSES = (0xC1, 0xC2, 0x81, 0x82, 0x41, 0x42, 0x01, 0x02)

NODES = {
    "atlas-200i-a2": {"chip_name": "310B1", "memory_mb": 4096, "chips": [{"phy_id": 0}]},
    "atlas-300i-duo": {
        "chip_name": "310P3",
        "chips": [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0, "fault_codes": ["80E18005"]}],
    },
    "atlas-300i-310": {
        "chip_name": "310",
        "latency_ms": 1,
        "aicore_cnt": 2,
        "chips": [{"phy_id": p, "card_id": 3, "logic_id": 3 - p, "health": p % 4} for p in range(4)],
    },
    "910b-slots": {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "errors": {"hbm_info": -8006},
        "chips": [
            {"phy_id": p, "card_id": 10 + 2 * p, "errors": {"health": -8012} if p == 5 else {}}
            for p in range(8)
        ],
    },
    "a3": {
        "chip_name": "Ascend910",
        "npu_name": "9391",
        "chips": [{"phy_id": 0}, {"phy_id": 1, "card_id": 0}],
    },
    "atlas-300i-duo-split": {
        "chip_name": "310P3",
        "memory_mb": 24576,
        "chips": [
            {
                "phy_id": 0,
                "card_id": 0,
                "vdevs": [
                    {"vdev_id": 100, "template": "vir02", "memory_mb": 6144},
                    {"vdev_id": 101, "template": "vir02", "memory_mb": 6144, "in_use": True},
                    {"vdev_id": 102, "template": "vir04", "memory_mb": 12288, "status": 1},
                ],
            },
            {"phy_id": 1, "card_id": 0},
        ],
    },
    "910b3-two-vir10": {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "chips": [
            {
                "phy_id": 0,
                "card_id": 5,
                "vdevs": [
                    {"vdev_id": 116, "template": "vir10_3c_32g"},
                    {"vdev_id": 117, "template": "vir10_3c_32g", "vfg_id": 3},
                ],
            }
        ],
    },
    "8x910b3-pcie-ip": {
        "chip_name": "910B3",
        "memory_mb": 65536,
        "chips": [
            {
                "phy_id": n,
                "card_id": 1 + n,
                "pcie": f"0000:{bus:02x}:00.0",
                # chip 6: no address on its RoCE port; chip 7: IPv6 only
                **(
                    {"device_ip": f"29.{n}.1.{10 + n}"}
                    if n < 6
                    else {"device_ip": "2001:db8::7"}
                    if n == 7
                    else {}
                ),
            }
            for n, bus in enumerate(_A2_BUSES)
        ],
    },
    "910a-8": {
        "chip_name": "910A",
        "memory_mb": 32768,
        "chips": [{"phy_id": n, "card_id": n, "device_ip": f"192.168.100.{101 + n}"} for n in range(8)],
    },
    "old-driver": {
        "chip_name": "910B3",
        "missing": ["error_codes", "subscribe_faults"],
        "chips": [{"phy_id": 0, "fault_codes": ["80E01801"]}, {"phy_id": 1}],
    },
}


def _answer(call: Callable[..., Any], *args: int) -> object:
    try:
        return call(*args)
    except DcmiError as error:
        return (type(error).__name__, error.function, error.code)
    except SymbolMissing as error:  # its path names the library or the scenario: not compared
        return ("SymbolMissing", error.function)


def _everything(library: DeviceLibrary) -> dict[str, object]:
    """Every answer the plugin could ask this node for, errors included."""
    answers: dict[str, object] = {
        "driver": library.driver_version(),
        "cards": library.card_list(),
        "missing": sorted(library.missing_functions()),
    }
    for card in library.card_list():
        count = library.device_count(card)
        answers[f"{card} count"] = count
        answers[f"{card} mcu"] = _answer(library.logic_id, card, count)
        for device in range(count):
            logic = library.logic_id(card, device)
            answers[f"{card}/{device} logic"] = logic
            answers[f"{card}/{device} phy"] = _answer(library.phy_id, logic)
            for call in (
                library.chip_info,
                library.total_aicore,
                library.health,
                library.error_codes,
                library.hbm_info,
                library.memory_info,
                library.pcie_address,
                library.device_ip,
                library.vdev_ids,
            ):
                answers[f"{card}/{device} {call.__name__}"] = _answer(call, card, device)
            vdevs = _answer(library.vdev_ids, card, device)
            for vdev in [*vdevs, 1123] if isinstance(vdevs, list) else [100]:
                answers[f"{card}/{device} vdev {vdev}"] = _answer(library.vdev_info, card, device, vdev)
    answers["unknown card"] = _answer(library.device_count, 9999)
    return answers


@pytest.mark.parametrize("node", NODES.values(), ids=NODES.keys())
def test_both_fakes_answer_alike(
    node: dict[str, Any], python_fake: PythonFakePlayer, c_fake: CFakePlayer
) -> None:
    scenario = FakeScenario.model_validate(node)
    assert _everything(c_fake.open(scenario)) == _everything(python_fake.open(scenario))
