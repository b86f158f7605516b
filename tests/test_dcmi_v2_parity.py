"""The DCMI v2 calls answer alike on the Python fake and the C fake (through the real binding).

Every v2 call is asked of every chip of the fakes' Atlas 850, with every type
it takes (and one no driver knows), errors and a reset included, and for a
logical id no chip has; the C fake answers through ``DcmiV2Library``, so this
also checks that the binding's v2 declarations decode what the fake wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_dcmi.players import CFakePlayer, PythonFakePlayer
from node_950 import CHIPS, node_950

from backends.errors import DcmiError, SymbolMissing
from backends.library import (
    DeviceLibraryV2,
    DieType,
    EccDeviceType,
    FrequencyType,
    ResetChannel,
    UtilizationType,
)

UNKNOWN_TYPE = 11


def _answer(call: Callable[..., Any], *args: Any) -> object:
    try:
        return call(*args)
    except DcmiError as error:
        return ("DcmiError", error.function, error.code)
    except SymbolMissing as error:
        return ("SymbolMissing", error.function)


def _everything(library: DeviceLibraryV2) -> dict[str, object]:
    answers: dict[str, object] = {"devices": library.device_list(), "driver": library.driver_version()}
    for dev in [*range(CHIPS), CHIPS]:
        for call in (
            library.phy_id,
            library.chip_info,
            library.total_aicore,
            library.super_pod_info,
            library.health,
            library.error_codes,
            library.hbm_info,
            library.pcie_address,
            library.affinity_cpu,
            library.temperature,
            library.power,
            library.voltage,
            library.multi_utilization,
            library.network_health,
            library.processes,
            library.boot_status,
        ):
            answers[f"{dev} {call.__name__}"] = _answer(call, dev)
        typed: tuple[tuple[Callable[..., Any], list[int]], ...] = (
            (library.frequency, [*FrequencyType, UNKNOWN_TYPE]),
            (library.utilization, [*UtilizationType, UNKNOWN_TYPE]),
            (library.ecc_info, [*EccDeviceType, UNKNOWN_TYPE]),
            (library.die_id, [*DieType, UNKNOWN_TYPE]),
            (library.multi_utilization_period, [1]),
        )
        for call, kinds in typed:
            for kind in kinds:
                answers[f"{dev} {call.__name__} {int(kind)}"] = _answer(call, dev, kind)
    answers["outband reset"] = _answer(library.reset, 2, ResetChannel.OUTBAND)
    answers["inband reset"] = _answer(library.reset, 2, ResetChannel.INBAND)
    answers["while resetting"] = _answer(library.temperature, 2)
    return answers


def test_both_fakes_answer_the_v2_calls_alike(python_fake: PythonFakePlayer, c_fake: CFakePlayer) -> None:
    own = {
        1: {"health": 2, "fault_codes": ["80E01801", "81B18603"], "telemetry": {"temperature_c": 77}},
        3: {"errors": {"voltage": -8005}, "processes": [{"pid": 4242, "memory_bytes": 1 << 30}]},
        5: {"cpu_affinity": "0-23"},
    }
    scenario = node_950(own, reset_seconds=60, super_pod={"super_pod_id": 2, "server_id": 5})
    answers = []
    for player in (python_fake, c_fake):
        v2 = player.open(scenario, init=False).v2()
        v2.init()
        answers.append(_everything(v2))
    python, c = answers
    assert c == python
    # Keyed by logical id: physical id 1 is logical id 5, physical id 5 logical id 1.
    assert (python["5 phy_id"], python["5 temperature"], python["5 health"]) == (1, 77, 2)
    assert python["1 affinity_cpu"] == "0-23"
    assert python[f"{CHIPS} health"] == ("DcmiError", "dcmiv2_get_device_health", -8001)
    assert python["while resetting"] == ("DcmiError", "dcmiv2_get_device_temperature", -8012)
