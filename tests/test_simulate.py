"""``ascend-device-plugin simulate``: the embedded demo runs its whole timeline and exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_plugin.cli import main


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
        # The level Huawei's built-in faultCode.json gives the code, as the plugin applies it.
        "injected fault 80E01801 (RestartBusiness) into the scenario file",
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


def _simulate(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascend_plugin", "simulate", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_simulate_share_count_offers_the_chip_n_times_and_hands_it_over_once() -> None:
    result = _simulate("--share-count", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "huawei.com/Ascend310: Ascend310-0-0 (Healthy), Ascend310-0-1 (Healthy), Ascend310-0-2 (Healthy), "
        "Ascend310-0-3 (Healthy)"
    ) in result.stdout
    assert "Allocate huawei.com/Ascend310 [Ascend310-0-0, Ascend310-0-1] ->" in result.stdout
    assert result.stdout.count("device /dev/davinci0 -> /dev/davinci0") == 1
    assert "npu-smi set -t device-share -i 0 -c 0 -d 1" in result.stdout
    assert "sockets left: none" in result.stdout


def test_simulate_vnpu_static_shows_a_resource_per_template_and_a_live_change() -> None:
    result = _simulate("--vnpu", "static")
    assert result.returncode == 0, result.stdout + result.stderr
    for step in (
        "huawei.com/Ascend310P: Ascend310P-1 (Healthy)",
        "huawei.com/Ascend310P-2c: Ascend310P-2c-100-0 (Healthy), Ascend310P-2c-101-0 (Healthy)",
        "huawei.com/Ascend310P-4c: Ascend310P-4c-102-0 (Healthy)",
        "Allocate huawei.com/Ascend310P-2c [Ascend310P-2c-100-0] ->",
        "device /dev/vdavinci100 -> /dev/davinci100",
        "device /dev/vdavinci102 -> /dev/davinci102",
        "huawei.com/Ascend310P-4c has no device left: its server stopped, the kubelet dropped it:",
        "sockets left: none",
    ):
        assert step in result.stdout
    after = result.stdout.split("has no device left", 1)[1]
    assert "Ascend310P-4c-102-0" not in after


def test_simulate_refuses_to_share_a_split_chip_with_exit_code_2() -> None:
    result = _simulate("--vnpu", "static", "--share-count", "2")
    assert result.returncode == 2
    assert "the plugin refused to start (exit code 2)" in result.stdout
    assert "would share chips that carry vNPUs" in result.stderr


def test_simulate_serve_dra_prepares_a_claim_end_to_end() -> None:
    result = _simulate("--serve", "dra")
    assert result.returncode == 0, result.stdout + result.stderr
    for step in (
        "registered DRA driver npu.huawei.com: endpoint ",
        "the kubelet chose v1.DRAPlugin",
        "pool atlas-800t-a2, generation 1, 8 devices",
        "capacity memory=64Gi",
        "npu-2 for npus: huawei.com/npu=",
        "prepared again: the same answer from the checkpoint (True)",
        "injected fault 80E01801 (RestartBusiness) on chip 5",
        "npu-5 left the slice: generation 1 -> 2, 7 devices",
        "health stream: npu-5 UNHEALTHY (fault 80E01801",
        "registered again; the slice is back",
        "NodeUnprepareResources -> error=''; CDI specs left: none",
    ):
        assert step in result.stdout, step


@pytest.mark.parametrize("option", [("--share-count", "2"), ("--vnpu", "static")])
def test_simulate_serve_dra_refuses_what_its_demo_does_not_show(
    option: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The DRA demo's node has whole 910B chips: a share count or vNPUs would be silently ignored."""
    with pytest.raises(SystemExit) as refused:
        main(["simulate", "--serve", "dra", *option])
    assert refused.value.code == 2
    error = capsys.readouterr().err
    assert "simulate --serve dra shows whole chips of a fake 910B server only" in error
    assert "--share-count and --vnpu work with --serve device-plugin (the default)" in error


def test_simulate_share_count_help_says_1_is_not_shared(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "(1-100; 1: not shared)" in " ".join(capsys.readouterr().out.split())


def test_simulate_family_950_serves_an_atlas_850_through_dcmi_v2() -> None:
    result = _simulate("--family", "950")
    assert result.returncode == 0, result.stdout + result.stderr
    for step in (
        "(DCMI v2)",
        "npu-0: logical id 4, NUMA node 0",
        "npu-7: logical id 3, NUMA node 1",
        "registered huawei.com/npu: capacity=8 allocatable=8",
        "Allocate huawei.com/npu [npu-0, npu-1] ->",
        "device /dev/davinci4 -> /dev/davinci4",
        "device /dev/uburma/uburma0 -> /dev/uburma/uburma0",
        "kubelet sees npu-3 Unhealthy, allocatable=7",
        "kubelet sees npu-3 Healthy again and npu-6 Unhealthy",
    ):
        assert step in result.stdout, step


def test_the_demos_name_the_level_the_built_in_fault_codes_give() -> None:
    """The demos say which level their fault has: the one in the faultCode.json the plugin ships."""
    import json
    from importlib import resources

    from ascend_plugin.testing.simulate import FAULT, built_in_level

    shipped = json.loads(resources.files("ascend_plugin").joinpath("data/faultCode.json").read_text())
    lists = [key for key, codes in shipped.items() if FAULT in codes]
    assert lists == ["RestartBusinessCodes"]
    assert built_in_level(FAULT) == "RestartBusiness"
    assert built_in_level("0") == "not in faultCode.json"
