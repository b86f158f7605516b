"""The plugin on the test node, as the chart runs it, with the chart's identity and nothing more.

The chart is rendered by Helm's engine with the family's values file; every object but the
DaemonSet is applied through the real API server (ServiceAccount, RBAC, ConfigMaps,
DeviceClasses). The DaemonSet's container is then run as a process on the host: its environment
as rendered (the downward API resolved for this node), the kubelet's directories of the test node
in place of /var/lib/kubelet, and the C fake libdcmi.so in place of the driver. Its credentials
are a token the API server issues for the chart's ServiceAccount, bound to a pod on this node
(as a DaemonSet pod's projected token is), so every call it makes is judged by the chart's RBAC.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api import Api
from chart_harness import Rendering
from cluster import Cluster, log_tail
from devices import chip_nodes, device_nodes
from fake_dcmi.build import build_fake_library
from fake_dcmi.scenario_file import SCENARIO_ENV, write_scenario
from images import TEST_IMAGE
from local_port import free_port

from backends.fake import FakeScenario

NAMESPACE = "kube-system"
IDENTITY_POD = "ascend-device-plugin-e2e-identity"
# Set by the chart's DaemonSet through the downward API or for the container's own paths.
_FROM_THE_POD = {"NODE_NAME", "HOST_IP", "POD_NAMESPACE", "LD_LIBRARY_PATH"}


def wait_for(condition: Callable[[], Any], what: str, within: float = 120.0, every: float = 0.2) -> Any:
    """``condition()``'s first truthy value; TimeoutError naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(Exception):
            value = condition()
            if value:
                return value
        if time.monotonic() > deadline:
            try:
                last = condition()
            except Exception as error:  # the last look's error explains the timeout
                last = repr(error)
            raise TimeoutError(f"not within {within:g} s: {what} (last: {last!r:.500})")
        time.sleep(every)


def applied_objects(rendering: Rendering) -> list[dict[str, Any]]:
    """What ``helm install`` would create, but the DaemonSet (run as a host process instead)."""
    skipped = {"DaemonSet", "ServiceMonitor"}
    return [manifest for manifest in rendering.manifests if manifest["kind"] not in skipped]


def bound_token(admin: Api, account: str, node: str, pod_name: str = IDENTITY_POD) -> str:
    """A token of ``account`` (in kube-system) bound to the pod ``pod_name`` on ``node``.

    The pod is made where it is missing; it never runs (its token is what a DaemonSet pod's projected
    token is: the API server adds the pod's node to it, which the chart's admission policy reads).
    """
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": NAMESPACE},
        "spec": {
            "serviceAccountName": account,
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "identity",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "86400"],
                }
            ],
        },
    }
    if admin.read("v1", "Pod", pod_name, NAMESPACE) is None:
        admin.create(pod)
    bound = wait_for(lambda: admin.read("v1", "Pod", pod_name, NAMESPACE), f"the identity pod {pod_name}")
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [],
            "expirationSeconds": 86400,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": bound["metadata"]["uid"],
            },
        },
    }
    answer = admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token", request)
    token: str = answer["status"]["token"]
    return token


@dataclass
class NodePlugin:
    """The plugin process of the test node, and what it needs around it."""

    cluster: Cluster
    rendering: Rendering
    scenario: FakeScenario
    folder: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    extra_nodes: tuple[str, ...] = ()  # device nodes the family has beyond the usual ones
    process: subprocess.Popen[bytes] | None = None
    http_port: int = 0
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def log(self) -> Path:
        return self.folder / "plugin.log"

    @property
    def scenario_path(self) -> Path:
        return self.folder / "scenario.txt"

    # -- set-up ---------------------------------------------------------------------------------

    def install(self) -> None:
        """Apply the chart's objects, make the chips' device nodes, get the plugin's token."""
        self.folder.mkdir(parents=True, exist_ok=True)
        admin = self.cluster.admin()
        admin.apply_all(applied_objects(self.rendering), NAMESPACE)
        write_scenario(self.scenario_path, self.scenario)
        library = self.folder / "lib" / "libdcmi.so"
        library.parent.mkdir(exist_ok=True)
        # A driver without some functions is a variant of the C fake built without them.
        library.write_bytes(build_fake_library(sorted(self.scenario.missing_functions())).read_bytes())
        self.library = library
        logic_ids = [placed.logic_id for placed in self.scenario.placed]
        shared = ["/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm", *self.extra_nodes]
        self._stack.enter_context(device_nodes(chip_nodes(logic_ids, shared)))
        self.kubeconfig = self.cluster.kubeconfig_for("plugin", self._token(), "plugin")

    def _token(self) -> str:
        """A token of the chart's ServiceAccount bound to a pod on this node, as its DaemonSet pod gets."""
        (account,) = {
            ds["spec"]["template"]["spec"]["serviceAccountName"] for ds in self.rendering.of_kind("DaemonSet")
        }
        return bound_token(self.cluster.admin(), account, self.cluster.node)

    def chart_env(self) -> dict[str, str]:
        """The literal environment of the DaemonSet that serves this node's mode (two with by-node-label)."""
        for daemonset in self.rendering.of_kind("DaemonSet"):
            (container,) = daemonset["spec"]["template"]["spec"]["containers"]
            env = {entry["name"]: entry["value"] for entry in container.get("env", []) if "value" in entry}
            if env.get("ASCEND_DP_SERVE", "device-plugin") == self.serve:
                return env
        raise LookupError(f"the chart runs no DaemonSet with serve {self.serve}")

    def environment(self) -> dict[str, str]:
        """The DaemonSet container's environment, for this node and its test paths."""
        env = {name: value for name, value in self.chart_env().items() if name not in _FROM_THE_POD}
        cluster = self.cluster
        env.update(
            {
                "NODE_NAME": cluster.node,
                "HOST_IP": cluster.address,
                "POD_NAMESPACE": NAMESPACE,
                "ASCEND_DP_KUBECONFIG": str(self.kubeconfig),
                "ASCEND_DP_DCMI_LIBRARY": str(self.library),
                "ASCEND_DP_DCMI_ALLOW_UNTRUSTED_LIBRARY": "true",
                "ASCEND_DP_DEVICE_PLUGIN_PATH": str(cluster.device_plugin_dir),
                "ASCEND_DP_POD_RESOURCES_SOCKET": str(cluster.pod_resources_socket),
                "ASCEND_DP_CDI_SPEC_DIR": str(cluster.cdi_dir),
                "ASCEND_DP_DRA_REGISTRY_PATH": str(cluster.plugins_registry),
                "ASCEND_DP_DRA_PLUGIN_PATH": str(cluster.kubelet_root / "plugins" / "npu.huawei.com"),
                "ASCEND_DP_HTTP_ADDRESS": f"127.0.0.1:{self.http_port}",
                "ASCEND_DP_LOG_FORMAT": "json",
                SCENARIO_ENV: str(self.scenario_path),
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            }
        )
        env.update(self.extra_env)
        return env

    # -- the process ----------------------------------------------------------------------------

    @property
    def serve(self) -> str:
        """The mode this node is served in: the test's choice, else the chart's first DaemonSet's."""
        if "ASCEND_DP_SERVE" in self.extra_env:
            return self.extra_env["ASCEND_DP_SERVE"]
        (container, *_) = self.rendering.of_kind("DaemonSet")[0]["spec"]["template"]["spec"]["containers"]
        env = {entry["name"]: entry.get("value") for entry in container.get("env", [])}
        return str(env.get("ASCEND_DP_SERVE") or "device-plugin")

    def start(self) -> None:
        self.http_port = free_port()
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ascend_plugin", "run"],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=Path(__file__).resolve().parents[2],
            )

    def restart(self, **env: str) -> None:
        """Stop the plugin and start it again, with ``env`` over the chart's environment.

        Returns once the kubelet has opened ListAndWatch again (device-plugin mode): until then
        the kubelet holds the resource's devices as unhealthy and refuses pods that ask for them.
        """
        streams = self.count("kubelet opened ListAndWatch")
        self.stop()
        self.extra_env = {**self.extra_env, **env}
        self.start()
        if self.serve == "device-plugin":
            wait_for(
                lambda: self.count("kubelet opened ListAndWatch") > streams, "the kubelet's ListAndWatch"
            )

    def count(self, message: str) -> int:
        """How many log lines so far say ``message``."""
        return sum(1 for line in self.lines() if line.get("msg") == message)

    def stop(self, how: int = 15) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(how)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"the plugin did not exit within 30 s of signal {how}:\n{log_tail(self.log)}"
            ) from None

    def running(self) -> str | None:
        """None while running; why not otherwise."""
        if self.process is None:
            return "not started"
        code = self.process.poll()
        return None if code is None else f"the plugin exited with {code}:\n{log_tail(self.log)}"

    def update(self, scenario: FakeScenario) -> None:
        """Change the fake node under the running plugin (the C fake re-reads its file)."""
        self.scenario = scenario
        temporary = self.scenario_path.with_suffix(".new")
        write_scenario(temporary, scenario)
        temporary.replace(self.scenario_path)

    def lines(self) -> list[dict[str, Any]]:
        parsed = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                parsed.append(json.loads(line))
        return parsed

    def probe(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    def close(self) -> None:
        with contextlib.suppress(AssertionError):
            self.stop()
        self._stack.close()


@contextlib.contextmanager
def node_plugin(
    cluster: Cluster,
    rendering: Rendering,
    scenario: FakeScenario,
    folder: Path,
    extra_nodes: tuple[str, ...] = (),
    **env: str,
) -> Iterator[NodePlugin]:
    plugin = NodePlugin(cluster, rendering, scenario, folder, env, extra_nodes)
    try:
        plugin.install()
        plugin.start()
        yield plugin
    finally:
        plugin.close()
