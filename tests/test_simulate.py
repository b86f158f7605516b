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
    ):
        assert step in result.stdout


def test_simulate_serve_dra_prepares_a_claim_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ascend_plugin", "simulate", "--serve", "dra"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for step in (
        "registered DRA driver npu.huawei.com: endpoint ",
        "the kubelet chose v1.DRAPlugin",
        "pool atlas-800t-a2, generation 1, 8 devices",
        "capacity memory=64Gi",
        "npu-2 for npus: huawei.com/npu=",
        "prepared again: the same answer from the checkpoint (True)",
        "npu-5 left the slice: generation 1 -> 2, 7 devices",
        "health stream: npu-5 UNHEALTHY (fault 80E01801",
        "registered again; the slice is back",
        "NodeUnprepareResources -> error=''; CDI specs left: none",
    ):
        assert step in result.stdout, step
