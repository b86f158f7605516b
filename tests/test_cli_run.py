"""``ascend-device-plugin run`` as a real process: serve, survive kubelet restarts, stop on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_harness import FakeNode, health_of, registered
from waiting import WAIT

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"


@pytest.fixture
def plugin_process(node: FakeNode, plugin_dir: Path, short_tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = (short_tmp / "plugin.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ascend_plugin",
            "run",
            "--backend",
            "fake",
            "--fake-scenario",
            str(node.scenario),
            "--device-plugin-path",
            str(plugin_dir),
            "--host-root",
            str(node.host_root),
            "--health-interval",
            "0.1",
            "--http-address",
            "",
            "--log-format",
            "json",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()
    log.close()


def test_serves_allocates_survives_restarts_and_stops_cleanly(
    plugin_process: subprocess.Popen[bytes], kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    kubelet.wait_until(registered(RESOURCE), WAIT, "registration")
    assert kubelet.health(RESOURCE) == {"Ascend310-0": "Healthy"}
    response = kubelet.allocate(RESOURCE, ["Ascend310-0"])
    assert "/dev/davinci0" in [spec.host_path for spec in response.container_responses[0].devices]

    for times in (2, 3, 4):
        kubelet.restart()
        kubelet.wait_until(registered(RESOURCE, times), WAIT, f"registration {times}")

    node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": ["80E01801"]}]})
    kubelet.wait_until(lambda k: health_of(RESOURCE, "Ascend310-0")(k) == "Unhealthy", WAIT, "unhealthy")

    plugin_process.send_signal(signal.SIGTERM)
    assert plugin_process.wait(timeout=WAIT) == 0
    kubelet.wait_until(lambda k: not k.resources[RESOURCE].stream_open, WAIT, "stream closed")
    assert kubelet.resources[RESOURCE].stream_end == "OK"
    assert not (plugin_dir / "Ascend310.sock").exists()


def test_sigint_stops_it_too(plugin_process: subprocess.Popen[bytes], kubelet: KubeletStandIn) -> None:
    kubelet.wait_until(registered(RESOURCE), WAIT, "registration")
    plugin_process.send_signal(signal.SIGINT)
    assert plugin_process.wait(timeout=WAIT) == 0
