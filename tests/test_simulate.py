"""``ascend-device-plugin simulate``: the embedded demo runs its whole timeline and exits 0."""

from __future__ import annotations

import subprocess
import sys


def test_simulate_prints_the_timeline_and_exits_0() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ascend_plugin", "simulate"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for step in (
        "registered huawei.com/Ascend310 on endpoint Ascend310.sock",
        "devices: {'Ascend310-0': 'Healthy'}  capacity=1 allocatable=1",
        "device /dev/davinci_manager_docker -> /dev/davinci_manager (rw)",
        "kubelet sees Ascend310-0 Unhealthy, allocatable=0",
        "kubelet sees Ascend310-0 Healthy again, allocatable=1",
        "kubelet restarted: deleted Ascend310.sock",
        "re-registered",
        "plugin stopped: ListAndWatch ended with OK",
        # The second node: a 2-NPU pod is placed on one card.
        "the plugin prefers Ascend310-1, Ascend310-2: both on the card in slot 5",
        "the kubelet stand-in was given Ascend310-1, Ascend310-2",
    ):
        assert step in result.stdout
