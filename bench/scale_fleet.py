"""Simulated nodes for bench/cluster_scale.py: the real control plane, Node objects, one driver each.

The control plane is the end-to-end suite's (tests/e2e/cluster.py) without a kubelet, with three
changes for a cluster of nodes nobody runs: the controller manager runs without its node lifecycle
controller (no kubelet renews the nodes' Leases, so it would taint every node unreachable after
40 s), the API server writes an audit log of the drivers' ServiceAccounts (every request they make,
with the node its token is bound to), and the scheduler and controller manager get the client rate
limits a large cluster gives them (their defaults cap claim pods at a few a second before any
scheduling is done; ``--kube-api-qps``). Each node is a Node object (Ready, never renewed) and the
product itself: ``python -m ascend_plugin run`` with the chart's environment, the C fake libdcmi.so,
its own kubelet directories, and a token of the chart's ServiceAccount bound to a pod on that node.
With no kubelet, its plugin watcher is played by the DRA stand-in, stopped once the driver is
registered.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api import Api
from chart_harness import Rendering
from cluster import DIE_WITH_PARENT, Cluster, log_tail
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario
from node_plugin import NAMESPACE, bound_token
from pki import kubeconfig

from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from backends.fake import FakeChip, FakeScenario

ROOT = Path(__file__).resolve().parents[1]
DRIVER = "npu.huawei.com"
REGISTERED_WITHIN = 120.0  # seconds for a driver to start and register (a loaded 2-core machine)
PUBLISHED_WITHIN = 180.0
_FROM_THE_POD = {"NODE_NAME", "HOST_IP", "POD_NAMESPACE", "LD_LIBRARY_PATH"}


# -- the control plane ---------------------------------------------------------------------------


def audit_policy(users: Sequence[str]) -> str:
    """An audit policy that logs the requests of ``users`` (metadata only), and nothing else."""
    return json.dumps(
        {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": list(users)}, {"level": "None"}],
        }
    )


@dataclass
class ScaleCluster(Cluster):
    """The end-to-end control plane, with the flags a cluster of simulated nodes needs (module doc)."""

    audited_users: tuple[str, ...] = ()
    client_qps: int = 0  # the scheduler's and controller manager's --kube-api-qps; 0: their defaults

    @property
    def audit_log(self) -> Path:
        return self.folder / "logs" / "audit.log"

    def _add(self, name: str, command: Sequence[str], env: Mapping[str, str] | None = None) -> Any:
        extra: list[str] = []
        if name == "kube-apiserver" and self.audited_users:
            policy = self.folder / "audit-policy.json"
            policy.write_text(audit_policy(self.audited_users), encoding="utf-8")
            extra += [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}"]
            extra += ["--audit-log-maxsize=0", "--audit-log-format=json"]
        if name == "kube-controller-manager":
            command = ["--controllers=*,-nodelifecycle" if c == "--controllers=*" else c for c in command]
        if name in ("kube-controller-manager", "kube-scheduler") and self.client_qps:
            extra += [f"--kube-api-qps={self.client_qps}", f"--kube-api-burst={2 * self.client_qps}"]
        return super()._add(name, [*command, *extra], env)

    def port(self, name: str) -> int:
        """The port a component serves its health and metrics on (its ``--secure-port``)."""
        flag = "--secure-port="
        return int(next(c for c in self.components[name].command if c.startswith(flag)).removeprefix(flag))

    def pid(self, name: str) -> int:
        process = self.components[name].process
        assert process is not None
        return process.pid  # setpriv execs the component: the same process


# -- nodes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A kind of simulated node: its chips, and the chart values file of its family's release."""

    name: str  # "910B3 x8"
    values_file: str
    release: str
    scenario: FakeScenario
    whole_chip_class: str  # the DeviceClass of a whole chip of this shape


def server_910b3() -> FakeScenario:
    """An Atlas 800T A2: eight 910B3 (20 AI cores, 64 GiB), one a card."""
    chips = tuple(FakeChip(phy_id=phy, card_id=phy, device_id=0) for phy in range(8))
    return FakeScenario(chip_name="910B3", aicore=20.0, memory_mb=65536, chips=chips)


def duo_310p3() -> FakeScenario:
    """An Atlas 300I Duo: two 310P3 (8 AI cores, 24 GiB) on one card."""
    chips = tuple(FakeChip(phy_id=phy, card_id=0, device_id=phy) for phy in range(2))
    return FakeScenario(chip_name="310P3", aicore=8.0, memory_mb=24576, chips=chips)


SHAPES = (
    Shape("910B3 x8", "values-910.yaml", "ascend-910", server_910b3(), "ascend910.npu.huawei.com"),
    Shape("300I Duo", "values-310p.yaml", "ascend-310p", duo_310p3(), "ascend310p.npu.huawei.com"),
)


def chart_env(rendering: Rendering) -> dict[str, str]:
    """The literal environment of the release's DRA DaemonSet."""
    container = rendering.daemonset["spec"]["template"]["spec"]["containers"][0]
    env = {entry["name"]: entry["value"] for entry in container.get("env", []) if "value" in entry}
    assert env.get("ASCEND_DP_SERVE") == "dra", "the release must be rendered with serve: dra"
    return {name: value for name, value in env.items() if name not in _FROM_THE_POD}


def service_account(rendering: Rendering) -> str:
    account: str = rendering.daemonset["spec"]["template"]["spec"]["serviceAccountName"]
    return account


def node_object(name: str) -> dict[str, Any]:
    """A Ready node of a large server; nothing renews it (the node lifecycle controller is off)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": "192", "memory": "1536Gi", "pods": "250", "ephemeral-storage": "4Ti"}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "a simulated node (bench/cluster_scale.py)",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {"capacity": resources, "allocatable": resources, "conditions": [ready]},
    }


@dataclass
class SimulatedNode:
    """One simulated node: its Node object, its folder, its driver process."""

    name: str
    shape: Shape
    folder: Path
    library: Path
    process: subprocess.Popen[bytes] | None = None
    kubeconfig: Path | None = None

    def create(self, cluster: ScaleCluster, rendering: Rendering) -> None:
        """The Node object, the identity pod and token, the kubelet's directories, the fake chips."""
        admin = cluster.admin()
        made = admin.create(node_object(self.name))
        # The API server taints a new Node not-ready (admission TaintNodesByCondition); the node
        # lifecycle controller, off here, would lift it on seeing the node Ready, as this does.
        untainted = [t for t in made["spec"].get("taints", []) if t["key"] != "node.kubernetes.io/not-ready"]
        patch = json.dumps({"spec": {"taints": untainted or None}}).encode()
        admin.request(
            "PATCH", f"/api/v1/nodes/{self.name}", patch, content_type="application/merge-patch+json"
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        token = bound_token(admin, service_account(rendering), self.name, f"identity-{self.name}")
        assert cluster.pki is not None
        self.kubeconfig = kubeconfig(
            self.folder / "plugin.kubeconfig", cluster.server, cluster.pki.ca, token, "plugin"
        )
        scenario = self.shape.scenario.model_copy(update={"vdev_node_dir": self.folder / "dev"})
        write_scenario(self.folder / "scenario.txt", scenario)
        for device in (*(f"davinci{chip.phy_id}" for chip in scenario.chips), "davinci_manager", "hisi_hdc"):
            (self.folder / "host" / "dev").mkdir(parents=True, exist_ok=True)
            (self.folder / "host" / "dev" / device).touch()

    @property
    def registry(self) -> Path:
        return self.folder / "kubelet" / "plugins_registry"

    @property
    def log(self) -> Path:
        return self.folder / "plugin.log"

    def environment(self, chart: Mapping[str, str]) -> dict[str, str]:
        """The chart's environment (:func:`chart_env`) with this node's name, paths and credentials."""
        kubelet = self.folder / "kubelet"
        return {
            **chart,
            "NODE_NAME": self.name,
            "HOST_IP": "127.0.0.1",
            "POD_NAMESPACE": NAMESPACE,
            "ASCEND_DP_KUBECONFIG": str(self.kubeconfig),
            "ASCEND_DP_DCMI_LIBRARY": str(self.library),
            "ASCEND_DP_DCMI_ALLOW_UNTRUSTED_LIBRARY": "true",
            "ASCEND_DP_HOST_ROOT": str(self.folder / "host"),
            "ASCEND_DP_DEVICE_PLUGIN_PATH": str(kubelet / "device-plugins"),
            "ASCEND_DP_POD_RESOURCES_SOCKET": str(kubelet / "pod-resources" / "kubelet.sock"),
            "ASCEND_DP_CDI_SPEC_DIR": str(self.folder / "cdi"),
            "ASCEND_DP_DRA_REGISTRY_PATH": str(self.registry),
            "ASCEND_DP_DRA_PLUGIN_PATH": str(kubelet / "plugins" / DRIVER),
            "ASCEND_DP_HTTP_ADDRESS": "",
            "ASCEND_DP_LOG_FORMAT": "json",
            SCENARIO_ENV: str(self.folder / "scenario.txt"),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }

    def start(self, chart: Mapping[str, str]) -> None:
        """The driver, in a session of its own (a Ctrl-C reaches the bench, which stops it), killed
        by the kernel if the bench dies without stopping it."""
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [*DIE_WITH_PARENT, sys.executable, "-m", "ascend_plugin", "run"],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=self.environment(chart),
                cwd=ROOT,
                start_new_session=True,
            )

    def register(self) -> None:
        """Play the kubelet's plugin watcher until it has registered the driver, then stop it."""
        standin = DraKubeletStandIn(self.registry, self.name, health_stream=False, scan_interval=0.2)
        standin.start()
        try:
            standin.wait_until(lambda kubelet: DRIVER in kubelet.drivers, REGISTERED_WITHIN, "registered")
        except TimeoutError:
            raise RuntimeError(f"{self.name}: the driver did not register:\n{self.failure()}") from None
        finally:
            standin.stop()

    def failure(self) -> str:
        code = None if self.process is None else self.process.poll()
        state = "running" if code is None else f"exited with {code}"
        return f"driver of {self.name} {state}; the end of {self.log}:\n{log_tail(self.log)}"

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def pools(admin: Api) -> dict[str, tuple[bool, int]]:
    """Node -> (its pool complete, its devices); complete: every slice of its newest generation is there."""
    slices: dict[str, list[dict[str, Any]]] = {}
    for found in admin.list("resource.k8s.io/v1", "ResourceSlice", fieldSelector=f"spec.driver={DRIVER}"):
        slices.setdefault(found["spec"].get("nodeName", ""), []).append(found["spec"])
    answer = {}
    for node, specs in slices.items():
        newest = max(spec["pool"]["generation"] for spec in specs)
        current = [spec for spec in specs if spec["pool"]["generation"] == newest]
        complete = len(current) == current[0]["pool"]["resourceSliceCount"]
        answer[node] = (complete, sum(len(spec.get("devices") or []) for spec in current))
    return answer


def memory_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def stop_all(nodes: Sequence[SimulatedNode]) -> None:
    """SIGTERM every driver at once, then wait for each."""
    for node in nodes:
        if node.process is not None and node.process.poll() is None:
            node.process.terminate()
    for node in nodes:
        with contextlib.suppress(Exception):
            node.stop()
