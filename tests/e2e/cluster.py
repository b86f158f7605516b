"""A one-node Kubernetes cluster of real components, started and torn down by the tests.

etcd, kube-apiserver (RBAC, the Node authorizer, NodeRestriction, service-account tokens),
kube-controller-manager, kube-scheduler, containerd with Debian's runc and CNI plugins, and the
kubelet, each a process of the binaries tests/e2e/build.py made, on loopback ports chosen at start
and in one temporary folder. A component that exits or does not become ready fails the start with
the tail of its own log. Nothing of the machine is changed but what a kubelet must change: its
cgroups (under ``/ascend-e2e-<n>`` of each v1 hierarchy, never moved or remounted), three kernel
tunables it sets at start (recorded before and put back after), and the device nodes the fake chips
need (tests/e2e/devices.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from api import Api
from build import Binaries
from images import PAUSE_IMAGE, import_images
from local_port import free_port
from pki import Pki, kubeconfig, make_pki

NODE = "e2e-node"
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
START_WITHIN = 120.0  # seconds a component gets to become ready (a loaded 2-core machine)
LOG_TAIL = 40
# The tunables the kubelet sets when protectKernelDefaults is off; the machine's values come back after.
KERNEL_TUNABLES = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")


class ClusterError(Exception):
    """A component could not be started; the message names it and carries its log's tail."""


# Each component is killed when the test process dies, however it dies (a CI timeout's SIGKILL).
DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL", "--")


def log_tail(path: Path, lines: int = LOG_TAIL) -> str:
    if not path.exists():
        return f"({path} was never written)"
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def node_address() -> str:
    """The machine's address the kubelet reports (never loopback: the kubelet refuses it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # no packet is sent: this only picks the route's source
        except OSError:  # no route out at all: the first address of the host's name
            return socket.gethostbyname(socket.gethostname())
        address: str = probe.getsockname()[0]
    return address


@dataclass
class Component:
    """One running process of the cluster."""

    name: str
    command: list[str]
    log: Path
    env: Mapping[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [*DIE_WITH_PARENT, *self.command],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def failure(self, why: str) -> ClusterError:
        return ClusterError(f"{self.name} {why}; the end of {self.log}:\n{log_tail(self.log)}")

    def wait_ready(self, ready: Callable[[], bool], within: float = START_WITHIN) -> None:
        deadline = time.monotonic() + within
        while True:
            if not self.running():
                code = self.process.returncode if self.process else None
                raise self.failure(f"exited with {code} while starting")
            with contextlib.suppress(Exception):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise self.failure(f"was not ready within {within:g} s")
            time.sleep(0.2)

    def stop(self, grace: float = 20.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _http_ok(url: str, token: str | None = None, ca: Path | None = None) -> bool:
    import ssl

    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ask = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(
        ask, timeout=5, context=context if url.startswith("https") else None
    ) as answer:
        return bool(answer.status == 200)


def _feature_gates(gates: Mapping[str, bool]) -> list[str]:
    return (
        [f"--feature-gates={','.join(f'{name}={str(on).lower()}' for name, on in sorted(gates.items()))}"]
        if gates
        else []
    )


@dataclass
class Cluster:
    """The running cluster: its folder, addresses, credentials and components."""

    binaries: Binaries
    folder: Path
    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: str = ""
    node: str = NODE
    with_node: bool = True  # False: the control plane alone (no containerd, no kubelet), for API tests
    components: dict[str, Component] = field(default_factory=dict)
    api_port: int = 0
    address: str = ""
    pki: Pki | None = None
    _tunables: dict[str, str] = field(default_factory=dict)
    _cgroup_root: str = ""

    # -- where things are -----------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubelet_root(self) -> Path:
        return self.folder / "kubelet"

    @property
    def device_plugin_dir(self) -> Path:
        """The kubelet's device-plugin directory: a constant of the kubelet, whatever its --root-dir."""
        return DEVICE_PLUGINS

    @property
    def plugins_registry(self) -> Path:
        return self.kubelet_root / "plugins_registry"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    @property
    def cdi_dir(self) -> Path:
        return self.folder / "cdi"

    @property
    def containerd_socket(self) -> Path:
        return self.folder / "containerd" / "containerd.sock"

    def admin(self) -> Api:
        assert self.pki is not None
        return Api(self.server, self.pki.ca, self.pki.admin_token)

    def kubeconfig_for(self, name: str, token: str, user: str) -> Path:
        assert self.pki is not None
        return kubeconfig(self.folder / f"{name}.kubeconfig", self.server, self.pki.ca, token, user)

    # -- start and stop -------------------------------------------------------------------------

    def start(self) -> None:
        if self.with_node:
            foreign = [pid for pid in _processes_naming("kubelet") if _is_foreign_kubelet(pid)]
            if foreign:
                raise ClusterError(
                    f"another kubelet runs on this machine (pid {foreign[0]}): the test node would fight it"
                )
            sweep_dead_runs()
            for stale in (*DEVICE_PLUGINS.glob("*.sock"), DEVICE_PLUGINS / "kubelet_internal_checkpoint"):
                stale.unlink(missing_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.address = node_address()
        self.pki = make_pki(self.folder / "pki", self.node, ["127.0.0.1", self.address])
        self._start_etcd()
        self._start_apiserver()
        admin = self.kubeconfig_for("admin", self.pki.admin_token, "e2e-admin")
        self._start_controller_manager(admin)
        self._start_scheduler(admin)
        if self.with_node:
            self._start_containerd()
            self.start_kubelet()

    def stop(self) -> None:
        for name in (
            "kubelet",
            "containerd",
            "kube-scheduler",
            "kube-controller-manager",
            "kube-apiserver",
            "etcd",
        ):
            if name in self.components:
                self.components[name].stop()
        if not self.with_node:
            shutil.rmtree(self.folder / "etcd", ignore_errors=True)
            return
        self._remove_containers()
        self._restore_tunables()
        self._remove_cgroups()
        _unmount_under(self.folder)
        for heavy in ("containerd", "etcd", "kubelet", "images"):  # the logs stay, for a failure's story
            shutil.rmtree(self.folder / heavy, ignore_errors=True)

    def _add(self, name: str, command: Sequence[str], env: Mapping[str, str] | None = None) -> Component:
        component = Component(name, list(command), self.folder / "logs" / f"{name}.log", env)
        self.components[name] = component
        component.start()
        return component

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._add(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        etcd.wait_ready(lambda: _http_ok(f"{self.etcd_url}/health"))

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        self.api_port = free_port()
        command = [
            str(self.binaries.path("kube-apiserver")),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            f"--advertise-address={self.address}",
            f"--secure-port={self.api_port}",
            f"--cert-dir={self.folder / 'apiserver-certs'}",
            f"--tls-cert-file={self.pki.serving_cert}",
            f"--tls-private-key-file={self.pki.serving_key}",
            f"--token-auth-file={self.pki.tokens}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki.service_account_public}",
            f"--service-account-signing-key-file={self.pki.service_account_key}",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            *_feature_gates(self.feature_gates),
        ]
        if self.runtime_config:
            command.append(f"--runtime-config={self.runtime_config}")
        apiserver = self._add("kube-apiserver", command)
        apiserver.wait_ready(lambda: _http_ok(f"{self.server}/readyz", self.pki.admin_token, self.pki.ca))

    def _start_controller(self, name: str, admin: Path, *extra: str) -> None:
        """The controller manager or the scheduler: the administrator's kubeconfig, a port of its own."""
        port = free_port()
        component = self._add(
            name,
            [
                str(self.binaries.path(name)),
                *(f"--{use}kubeconfig={admin}" for use in ("", "authentication-", "authorization-")),
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                *extra,
                *_feature_gates(self.feature_gates),
            ],
        )
        component.wait_ready(lambda: _http_ok(f"https://127.0.0.1:{port}/healthz"))

    def _start_controller_manager(self, admin: Path) -> None:
        assert self.pki is not None
        self._start_controller(
            "kube-controller-manager",
            admin,
            f"--service-account-private-key-file={self.pki.service_account_key}",
            f"--root-ca-file={self.pki.ca}",
            "--controllers=*",
        )

    def _start_scheduler(self, admin: Path) -> None:
        self._start_controller("kube-scheduler", admin)

    def _containerd_config(self) -> str:
        root = self.folder / "containerd"
        cni = self.folder / "cni"
        cni.mkdir(parents=True, exist_ok=True)
        (cni / "10-e2e.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "e2e",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "e2e0",
                            "isGateway": True,
                            "ipMasq": False,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": "10.233.0.0/24"}]],
                                "dataDir": str(self.folder / "cni-ipam"),
                            },
                        },
                        {"type": "loopback"},
                    ],
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        return f"""version = 3
root = "{root / "root"}"
state = "{root / "state"}"

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.containerd_socket}.ttrpc"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  # The kubelet asks for -998 for sandboxes; this machine's sessions may not lower their OOM score.
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["{self.cdi_dir}"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{self.runc}"
        Root = "{self.folder / "runc"}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{cni}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""

    @property
    def runc(self) -> str:
        return os.environ.get("ASCEND_E2E_RUNC") or shutil.which("runc") or "/usr/sbin/runc"

    def _start_containerd(self) -> None:
        config = self.folder / "containerd.toml"
        config.write_text(self._containerd_config(), encoding="utf-8")
        bin_dir = self.binaries.path("containerd").parent
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        containerd = self._add(
            "containerd", [str(self.binaries.path("containerd")), f"--config={config}"], env
        )
        ctr = [str(self.binaries.path("ctr")), "--address", str(self.containerd_socket), "version"]
        containerd.wait_ready(lambda: subprocess.run(ctr, capture_output=True, check=False).returncode == 0)
        try:
            import_images(self.binaries.path("ctr"), self.containerd_socket, self.folder / "images")
        except RuntimeError as failed:
            raise containerd.failure(str(failed)) from None

    def _make_cgroup_root(self) -> None:
        """The kubelet's ``cgroupRoot`` in each v1 hierarchy (it refuses to start without them).

        New cgroups beside the machine's own, as docker's and podman's are: nothing is moved or
        remounted. A new cpuset starts empty, so it gets its parent's CPUs and memory nodes.
        """
        self._cgroup_root = f"/ascend-e2e-{os.getpid()}"
        for hierarchy in _hierarchies():
            folder = hierarchy / self._cgroup_root.lstrip("/")
            folder.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (folder / name).exists() and not (folder / name).read_text().strip():
                    (folder / name).write_text((hierarchy / name).read_text())

    def _kubelet_config(self) -> dict[str, Any]:
        self._make_cgroup_root()
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "0.0.0.0",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self._cgroup_root,
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "podLogsDir": str(self.folder / "pod-logs"),
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "featureGates": dict(self.feature_gates),
            "fileCheckFrequency": "1s",
        }

    def start_kubelet(self) -> None:
        """Start (or start again) the kubelet; waits for the node to be Ready."""
        assert self.pki is not None
        self._record_tunables()
        self.kubelet_root.mkdir(parents=True, exist_ok=True)
        config = self.folder / "kubelet.yaml"
        if "kubelet" not in self.components:
            config.write_text(yaml.safe_dump(self._kubelet_config()), encoding="utf-8")
        kubeconfig_path = self.kubeconfig_for("kubelet", self.pki.kubelet_token, f"system:node:{self.node}")
        started = time.time()
        kubelet = self._add(
            "kubelet",
            [
                str(self.binaries.path("kubelet")),
                f"--config={config}",
                f"--kubeconfig={kubeconfig_path}",
                f"--root-dir={self.kubelet_root}",
                f"--cert-dir={self.folder / 'kubelet-pki'}",
                f"--hostname-override={self.node}",
                f"--node-ip={self.address}",
                "--v=2",
            ],
        )
        kubelet.wait_ready(lambda: self._node_ready(since=started))

    def stop_kubelet(self) -> None:
        self.components.pop("kubelet").stop()

    def _node_ready(self, since: float = 0.0) -> bool:
        node = self.admin().read("v1", "Node", self.node)
        if node is None:
            return False
        for condition in node["status"].get("conditions", []):
            if condition["type"] == "Ready":
                heartbeat = condition.get("lastHeartbeatTime", "")
                fresh = not since or _parse_time(heartbeat) >= since - 1
                return bool(condition["status"] == "True" and fresh)
        return False

    # -- what the kubelet changes on the machine ------------------------------------------------

    def _record_tunables(self) -> None:
        for name in KERNEL_TUNABLES:
            path = Path("/proc/sys") / name
            if name not in self._tunables and path.exists():
                self._tunables[name] = path.read_text(encoding="utf-8").strip()

    def _restore_tunables(self) -> None:
        for name, value in self._tunables.items():
            with contextlib.suppress(OSError):
                (Path("/proc/sys") / name).write_text(value, encoding="utf-8")

    def _remove_containers(self) -> None:
        """Kill what the kubelet left running: every process in this cluster's cgroups, and the shims."""
        _kill_cgroup(self._cgroup_root)
        for shim in _processes_naming(str(self.containerd_socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(shim, signal.SIGKILL)
        subprocess.run(["ip", "link", "delete", "e2e0"], capture_output=True, check=False)
        for stale in (*DEVICE_PLUGINS.glob("*.sock"), DEVICE_PLUGINS / "kubelet_internal_checkpoint"):
            stale.unlink(missing_ok=True)

    def _remove_cgroups(self) -> None:
        _remove_cgroup_tree(self._cgroup_root)


# -- the machine: what a test cluster leaves behind, and what a killed run left ------------------

CGROUPS = Path("/sys/fs/cgroup")


def _hierarchies() -> list[Path]:
    return [h for h in sorted(CGROUPS.iterdir()) if (h / "cgroup.procs").exists() and h.name != "unified"]


def _kill_cgroup(root: str) -> None:
    """SIGKILL every process in ``root`` and below, in every hierarchy (the pids one lists them all)."""
    if not root:
        return
    for hierarchy in _hierarchies():
        top = hierarchy / root.lstrip("/")
        for procs in top.rglob("cgroup.procs") if top.is_dir() else ():
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)


def _remove_cgroup_tree(root: str) -> None:
    """Remove the kubelet's empty cgroups under ``root``, deepest first (rmdir only: nothing is moved)."""
    if not root:
        return
    deadline = time.monotonic() + 10
    for hierarchy in _hierarchies():
        top = hierarchy / root.lstrip("/")
        while top.is_dir() and time.monotonic() < deadline:
            for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()
            if top.is_dir():
                time.sleep(0.1)  # a killed process leaves its cgroup a moment after it died


def _unmount_under(folder: Path) -> None:
    """Unmount what the kubelet and containerd mounted under ``folder`` (deepest first, lazily)."""
    prefix = str(folder.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix) or point == prefix[:-1]:
            points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_foreign_kubelet(pid: int) -> bool:
    """A kubelet that is not one of the test clusters' (theirs run from the build cache)."""
    with contextlib.suppress(OSError):
        command = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode()
        return command.endswith("/kubelet") and "ascend-device-plugin-e2e" not in command
    return False


def sweep_dead_runs() -> list[str]:
    """Clear what earlier runs that were killed left: their containers, shims and cgroups.

    Each cluster's cgroups are named after the test process (``ascend-e2e-<pid>``), so a run whose
    process is gone is known; its containers are killed through its cgroups, the shims of its
    containerd (whose socket is gone with its folder) are killed by name.
    """
    swept = []
    for hierarchy in _hierarchies()[:1]:
        for top in hierarchy.glob("ascend-e2e-*"):
            owner = top.name.rsplit("-", 1)[1]
            if owner.isdigit() and not _alive(int(owner)):
                _kill_cgroup(f"/{top.name}")
                _remove_cgroup_tree(f"/{top.name}")
                swept.append(top.name)
    for shim in _processes_naming("containerd-shim-runc-v2"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            arguments = (Path("/proc") / str(shim) / "cmdline").read_bytes().split(b"\0")
            address = arguments[arguments.index(b"-address") + 1].decode()
            if address.endswith("/containerd/containerd.sock") and not Path(address).exists():
                os.kill(shim, signal.SIGKILL)  # a test cluster's containerd whose folder is gone
    return swept


def _parse_time(text: str) -> float:
    import datetime

    if not text:
        return 0.0
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()


@contextlib.contextmanager
def running_cluster(binaries: Binaries, folder: Path, **options: Any) -> Iterator[Cluster]:
    """A started cluster, stopped (and the machine put back) at the end, whatever happened."""
    cluster = Cluster(binaries, folder, **options)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
