"""One bad card at start never takes the other chips away: a real plugin process on the C fake libdcmi.so.

A card off the bus (-8012 to every query, its ids included) is left out, said
in the log and /readyz, and asked for again; once the driver names it, /healthz
asks for the restart that serves it. A chip whose chip info hangs, or that is
in the middle of a hot reset when the plugin starts (its chip info answers
"not ready" while it boots), is served under its ID, Unhealthy and named in
/readyz, and read again until it answers; then its verdict decides.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from log_records import lines
from plugin_harness import FakeNode
from plugin_process import PluginProcess, on_c_fake, plugin_process
from waiting import WAIT, eventually

from ascend_plugin.inventory.discovery import READ_AGAIN_BACKOFF
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario
from backends.fake.driver_state import DriverStateFile
from backends.library import ResetChannel

pytestmark = pytest.mark.slow

RESOURCE = "huawei.com/Ascend910"
DISCOVERY = "ascend_plugin.inventory.discovery"
# Every query a card off the bus answers -8012 to, its logic id first.
EVERY_QUERY = (
    "logic_id",
    "phy_id",
    "chip_info",
    "total_aicore",
    "health",
    "error_codes",
    "hbm_info",
    "pcie_address",
)


def server(**bad: Any) -> FakeScenario:
    """Four 910B3 on cards 0-3; chip 2 as ``bad`` says."""
    chips: list[dict[str, Any]] = [{"phy_id": n, "card_id": n} for n in range(4)]
    chips[2].update(bad)
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips, "memory_mb": 65536})


@pytest.fixture
def fake_node(c_fake: CFakePlayer, short_tmp: Path) -> FakeNode:
    node = FakeNode(c_fake.scenario_path, short_tmp / "host")
    node.add_host_paths(*(f"/dev/davinci{n}" for n in range(4)), "/dev/davinci_manager")
    return node


@pytest.fixture
def start(c_fake: CFakePlayer, fake_node: FakeNode, plugin_dir: Path, short_tmp: Path) -> Iterator[Any]:
    """Start the plugin on the C fake (1 s call timeout); it is killed at the end of the test."""
    with plugin_process(
        fake_node,
        plugin_dir,
        short_tmp / "plugin.log",
        *on_c_fake(c_fake),
        "--dcmi-call-timeout",
        "1",
        "--allocate-mode",
        "device",
        "--no-telemetry",
        http=True,
    ) as plugin:
        yield plugin


# A chip not read at start is asked again after 1 s, 2 s, 4 s ... up to every 15 s: the wait for its
# read covers one whole interval beyond the usual deadline.
READ_AGAIN = WAIT + READ_AGAIN_BACKOFF.cap


def served(kubelet: KubeletStandIn, expected: dict[str, str], within: float = WAIT) -> None:
    kubelet.wait_until(lambda k: k.health(RESOURCE) == expected, within, f"the kubelet sees {expected}")


def ready_with(plugin: PluginProcess, *words: str) -> str:
    """/readyz's answer once it is 200 and says every one of ``words``."""
    return eventually(
        lambda: (
            body
            if (answer := plugin.readiness())[0] == 200 and all(w in (body := answer[1]) for w in words)
            else None
        ),
        f"/readyz ready, saying {words}",
        every=0.05,
        unless=plugin.exited,
        explain=lambda: str(plugin.readiness()),
    )


def test_a_card_off_the_bus_is_left_out_and_its_return_asks_for_a_restart(
    c_fake: CFakePlayer, start: Any, kubelet: KubeletStandIn
) -> None:
    c_fake.update(server(errors=dict.fromkeys(EVERY_QUERY, -8012)))
    plugin: PluginProcess = start
    served(kubelet, {"Ascend910-0": "Healthy", "Ascend910-1": "Healthy", "Ascend910-3": "Healthy"})
    said = ready_with(plugin, "ready: 3 of 3 chips healthy", "card 2 device 0 not served", "-8012")
    assert "Ascend910-2" not in said, "no ID is made up for a chip the driver does not name"
    (left_out,) = lines(plugin.lines(), DISCOVERY, level="ERROR", card=2)
    assert "-8012" in left_out["error"]
    assert plugin.liveness() == (200, "ok\n")

    c_fake.update(server())  # the card answers again
    status, why = eventually(
        lambda: answer if (answer := plugin.liveness())[0] != 200 else None,
        "/healthz asks for a restart",
        within=READ_AGAIN,
        every=0.05,
        unless=plugin.exited,
    )
    assert (status, why) == (503, "card 2 device 0 answered after the plugin started: a restart serves it\n")
    assert kubelet.health(RESOURCE) == {
        "Ascend910-0": "Healthy",
        "Ascend910-1": "Healthy",
        "Ascend910-3": "Healthy",
    }


def test_a_chip_whose_chip_info_hangs_is_served_unhealthy_and_read_once_it_answers(
    c_fake: CFakePlayer, start: Any, kubelet: KubeletStandIn
) -> None:
    c_fake.update(server(hang=["chip_info"]))
    plugin: PluginProcess = start
    served(
        kubelet,
        {
            "Ascend910-0": "Healthy",
            "Ascend910-1": "Healthy",
            "Ascend910-2": "Unhealthy",
            "Ascend910-3": "Healthy",
        },
    )
    ready_with(plugin, "Ascend910-2 Unhealthy until read", "chip_info did not return within 1 s")

    c_fake.update(server())  # the hung call returns: the chip is read, and healthy
    served(kubelet, {f"Ascend910-{n}": "Healthy" for n in range(4)}, READ_AGAIN)
    assert "until read" not in ready_with(plugin, "ready: 4 of 4 chips healthy")
    (read,) = lines(plugin.lines(), DISCOVERY, level="INFO", device="Ascend910-2")
    assert "is read" in read["msg"]


def test_a_plugin_started_while_a_chip_resets_serves_the_others_and_the_chip_once_it_is_back(
    c_fake: CFakePlayer, fake_node: FakeNode, kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    c_fake.update(server(reset_seconds=600))
    c_fake.open().reset(2, 0, ResetChannel.INBAND)  # another plugin, or npu-smi, started it
    with plugin_process(
        fake_node, plugin_dir, short_tmp / "plugin.log", *on_c_fake(c_fake), "--no-telemetry", http=True
    ) as plugin:
        served(
            kubelet,
            {
                "Ascend910-0": "Healthy",
                "Ascend910-1": "Healthy",
                "Ascend910-2": "Unhealthy",
                "Ascend910-3": "Healthy",
            },
        )
        ready_with(plugin, "Ascend910-2 Unhealthy until read", "-8012")
        DriverStateFile.beside(c_fake.scenario_path).path.unlink()  # the chip is back (the driver forgets)
        served(kubelet, {f"Ascend910-{n}": "Healthy" for n in range(4)}, READ_AGAIN)
