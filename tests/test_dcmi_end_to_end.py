"""The whole plugin on the real DCMI binding: ``run --backend dcmi`` as a process over the C fake libdcmi.so.

The kubelet stand-in (grpcio) runs in the test process; the plugin process
loads the fake library through cffi exactly as it would load Huawei's, reading
its node from the scenario named by FAKE_DCMI_SCENARIO.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario
from log_records import lines
from plugin_harness import health_of, registered
from waiting import WAIT, eventually

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.slow

DISCOVERY = "ascend_plugin.inventory.discovery"  # the chips found, or each attempt that found none
MONITOR = "ascend_plugin.inventory.monitor"  # health transitions, the subscription, fault-event lines


class PluginProcess:
    """One ``python -m ascend_plugin run`` process and its JSON log."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def records(self) -> list[dict[str, Any]]:
        """The log lines written so far (a line still being written is skipped)."""
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]

    def wait_for(self, condition: Callable[[list[dict[str, Any]]], bool], what: str) -> list[dict[str, Any]]:
        """The log once ``condition`` holds on it; fail at once if the process has died."""
        (records,) = eventually(
            lambda: (records,) if condition(records := self.records()) else None,
            what,
            every=0.02,
            unless=self.exited,
            explain=self.text,
        )
        return records

    def exited(self) -> str | None:
        """Why waiting for the plugin is pointless: it has exited (None while it runs)."""
        code = self.process.poll()
        return None if code is None else f"the plugin exited ({code})"

    def text(self) -> str:
        return self.log_path.read_text(encoding="utf-8")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


class DcmiNode:
    """A fake node for the plugin process: scenario file, host root, and how to start the plugin on it."""

    def __init__(self, root: Path, plugin_dir: Path, library: Path) -> None:
        self.root = root
        self.plugin_dir = plugin_dir
        self.library = library
        self.scenario = root / "scenario.txt"
        self.host_root = root / "host"
        self.processes: list[PluginProcess] = []

    def write(self, scenario: FakeScenario) -> None:
        write_scenario(self.scenario, scenario)

    def add_host_paths(self, *paths: str) -> None:
        for path in paths:
            target = self.host_root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()

    def start(self, *extra: str, library: Path | None = None, trust_check: bool = False) -> PluginProcess:
        command = [
            sys.executable, "-m", "ascend_plugin", "run",
            "--backend", "dcmi",
            "--device-plugin-path", str(self.plugin_dir),
            "--host-root", str(self.host_root),
            "--http-address", "",
            "--allocate-mode", "device",
            "--health-interval", "0.1",
            "--log-format", "json",
        ]  # fmt: skip
        if library is not None:
            command += ["--dcmi-library", str(library)]
        if not trust_check:
            command.append("--dcmi-allow-untrusted-library")
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ASCEND_", "NODE_NAME", "HOST_IP"))
        }
        env[SCENARIO_ENV] = str(self.scenario)
        env.pop("LD_LIBRARY_PATH", None)
        process = PluginProcess([*command, *extra], env, self.root / f"plugin-{len(self.processes)}.log")
        self.processes.append(process)
        return process


@pytest.fixture
def dcmi_node(short_tmp: Path, plugin_dir: Path, fake_dcmi_library: Path) -> Iterator[DcmiNode]:
    node = DcmiNode(short_tmp, plugin_dir, fake_dcmi_library)
    node.host_root.mkdir()
    yield node
    for process in node.processes:
        process.stop()


def _scenario(chip_name: str, chips: list[dict[str, Any]], **node: Any) -> FakeScenario:
    return FakeScenario.model_validate({"chip_name": chip_name, "chips": chips, **node})


def _devices(kubelet: KubeletStandIn, resource: str, ids: list[str]) -> dict[str, str]:
    """Allocate ``ids`` for one container; its device nodes, host path -> container path."""
    response = kubelet.allocate(resource, ids).container_responses[0]
    return {spec.host_path: spec.container_path for spec in response.devices}


# -- nodes -----------------------------------------------------------------------------


def test_atlas_200i_a2(dcmi_node: DcmiNode, kubelet: KubeletStandIn) -> None:
    dcmi_node.write(_scenario("310B1", [{"phy_id": 0, "card_id": 0}], memory_mb=4096))
    dcmi_node.add_host_paths(
        "/dev/davinci0", "/dev/davinci_manager", "/dev/davinci_manager_docker", "/dev/hisi_hdc",
        "/dev/devmm_svm", "/dev/svm0", "/dev/vpc", "/dev/venc", "/dev/upgrade",
    )  # fmt: skip
    plugin = dcmi_node.start(library=dcmi_node.library)

    kubelet.wait_until(registered("huawei.com/Ascend310"), WAIT, "registration")
    assert kubelet.health("huawei.com/Ascend310") == {"Ascend310-0": "Healthy"}
    devices = _devices(kubelet, "huawei.com/Ascend310", ["Ascend310-0"])
    assert devices == {
        "/dev/davinci0": "/dev/davinci0",
        "/dev/davinci_manager_docker": "/dev/davinci_manager",
        "/dev/hisi_hdc": "/dev/hisi_hdc",
        "/dev/devmm_svm": "/dev/devmm_svm",
        "/dev/svm0": "/dev/svm0",
        "/dev/vpc": "/dev/vpc",
        "/dev/venc": "/dev/venc",
        "/dev/upgrade": "/dev/upgrade",
    }
    records = plugin.records()
    (found,) = lines(records, DISCOVERY, level="INFO", family="310B")
    assert (found["implementation"], found["library"]) == ("Ascend310B", str(dcmi_node.library))
    assert not [r for r in records if "ai_cores" in r], "1.0 AI cores is right for a 310B1"


def test_atlas_300i_duo(dcmi_node: DcmiNode, kubelet: KubeletStandIn) -> None:
    dcmi_node.write(_scenario("310P3", [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}]))
    dcmi_node.add_host_paths("/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager")
    dcmi_node.start(library=dcmi_node.library)

    kubelet.wait_until(registered("huawei.com/Ascend310P"), WAIT, "registration")
    assert kubelet.health("huawei.com/Ascend310P") == {"Ascend310P-0": "Healthy", "Ascend310P-1": "Healthy"}
    devices = _devices(kubelet, "huawei.com/Ascend310P", ["Ascend310P-1"])
    assert devices == {"/dev/davinci1": "/dev/davinci1", "/dev/davinci_manager": "/dev/davinci_manager"}


def test_910b_server_with_slot_numbered_cards(dcmi_node: DcmiNode, kubelet: KubeletStandIn) -> None:
    def server(faulty: int | None) -> FakeScenario:
        chips = [
            {
                "phy_id": n,
                "card_id": [1, 2, 3, 4, 9, 10, 11, 12][n],
                "fault_codes": ["80E01801"] if n == faulty else [],
            }
            for n in range(8)
        ]
        return _scenario("910B3", chips, memory_mb=65536)

    dcmi_node.write(server(None))
    dcmi_node.add_host_paths(*(f"/dev/davinci{n}" for n in range(8)), "/dev/davinci_manager", "/dev/hisi_hdc")
    plugin = dcmi_node.start(library=dcmi_node.library)

    kubelet.wait_until(registered("huawei.com/Ascend910"), WAIT, "registration")
    assert kubelet.health("huawei.com/Ascend910") == {f"Ascend910-{n}": "Healthy" for n in range(8)}
    devices = _devices(kubelet, "huawei.com/Ascend910", ["Ascend910-4", "Ascend910-6"])
    assert list(devices) == ["/dev/davinci4", "/dev/davinci6", "/dev/davinci_manager", "/dev/hisi_hdc"]
    plugin.wait_for(lambda rs: bool(lines(rs, MONITOR, logic_ids=list(range(8)))), "the subscription")

    dcmi_node.write(server(5))
    kubelet.wait_until(
        lambda k: health_of("huawei.com/Ascend910", "Ascend910-5")(k) == "Unhealthy", WAIT, "fault"
    )
    plugin.wait_for(
        lambda rs: any(
            "events" in r and r["codes"] == ["80E01801"] for r in lines(rs, MONITOR, device="Ascend910-5")
        ),
        "the fault event",
    )
    dcmi_node.write(server(None))
    kubelet.wait_until(
        lambda k: health_of("huawei.com/Ascend910", "Ascend910-5")(k) == "Healthy", WAIT, "recovery"
    )


def test_atlas_300i_card_of_four_310(dcmi_node: DcmiNode, kubelet: KubeletStandIn) -> None:
    dcmi_node.write(_scenario("310", [{"phy_id": p, "card_id": 5, "logic_id": 3 - p} for p in range(4)]))
    dcmi_node.add_host_paths(*(f"/dev/davinci{n}" for n in range(4)), "/dev/davinci_manager")
    dcmi_node.start(library=dcmi_node.library)

    kubelet.wait_until(registered("huawei.com/Ascend310"), WAIT, "registration")
    assert kubelet.health("huawei.com/Ascend310") == {f"Ascend310-{n}": "Healthy" for n in range(4)}
    devices = _devices(kubelet, "huawei.com/Ascend310", ["Ascend310-2"])
    assert devices == {"/dev/davinci2": "/dev/davinci2", "/dev/davinci_manager": "/dev/davinci_manager"}


# -- libraries that cannot serve -------------------------------------------------------------


def _keeps_retrying(plugin: PluginProcess, problem: str) -> None:
    """One clear ERROR line for the problem, the same problem retried (at DEBUG), the process alive."""

    def attempts(records: list[dict[str, Any]], level: str) -> list[str]:
        return [r["error"] for r in lines(records, DISCOVERY, level=level) if "attempt" in r]

    records = plugin.wait_for(lambda rs: len(attempts(rs, "DEBUG")) >= 1, "a second attempt")
    errors = attempts(records, "ERROR")
    assert len(errors) == 1, errors
    assert problem in errors[0]
    assert problem in attempts(records, "DEBUG")[0]
    assert plugin.process.poll() is None


def test_a_missing_library(dcmi_node: DcmiNode, kubelet: KubeletStandIn) -> None:
    plugin = dcmi_node.start("--log-level", "DEBUG")
    _keeps_retrying(
        plugin, "libdcmi.so not found; looked in /usr/local/Ascend/driver/lib64/driver/libdcmi.so"
    )
    assert kubelet.registrations == []


def test_an_untrusted_library(dcmi_node: DcmiNode) -> None:
    dcmi_node.write(_scenario("310B1", [{"phy_id": 0}]))
    open_dir = dcmi_node.root / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    library = Path(shutil.copy(dcmi_node.library, open_dir / "libdcmi.so"))
    plugin = dcmi_node.start("--log-level", "DEBUG", library=library, trust_check=True)
    _keeps_retrying(
        plugin, f"refusing to load {library}: directory {open_dir} is writable by group and others"
    )


def test_a_library_whose_init_fails(dcmi_node: DcmiNode) -> None:
    dcmi_node.write(_scenario("310B1", [{"phy_id": 0}], errors={"init": -8005}))
    plugin = dcmi_node.start("--log-level", "DEBUG", library=dcmi_node.library)
    _keeps_retrying(plugin, "dcmi_init returned -8005")


def test_a_library_missing_a_symbol(dcmi_node: DcmiNode) -> None:
    dcmi_node.write(_scenario("310B1", [{"phy_id": 0}]))
    library = build_fake_library(hidden=("dcmi_get_device_chip_info_v2",))
    plugin = dcmi_node.start("--log-level", "DEBUG", library=library)
    _keeps_retrying(plugin, f"{library} has no symbol dcmi_get_device_chip_info_v2")
