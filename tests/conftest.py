"""Shared fixtures: a short temporary directory, a kubelet stand-in, a fake node."""

from __future__ import annotations

import inspect
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fake_apiserver import FakeApiServer
from fake_dcmi.build import build_fake_library
from fake_dcmi.players import CFakePlayer, PythonFakePlayer, ScenarioPlayer
from fake_dcmi.scenario_file import SCENARIO_ENV
from plugin_harness import FakeNode

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.families import ASCEND_310B

if TYPE_CHECKING:  # imported lazily: kubernetes-asyncio is heavy and most tests never need it
    from ascend_plugin.kubeapi.client import Kube


@pytest.fixture
def anyio_backend() -> str:
    """grpclib runs on asyncio, so the whole plugin does."""
    return "asyncio"


# -- leaks: a test must leave no task and no thread of its own behind -----------------------

LEAK_WAIT = 10.0  # seconds a finished test's threads and tasks get to wind down


# Worker pools of the event loop itself (asyncio's default executor, anyio's threads): they
# belong to the loop the test runner owns and end with it. Threads a C library started and that
# called into Python (the fake libdcmi.so's event thread: DCMI cannot unsubscribe) are not
# Python's to join either.
LOOP_POOLS = ("asyncio_", "AnyIO worker thread")


def _ours(thread: threading.Thread) -> bool:
    return not thread.name.startswith(LOOP_POOLS) and not isinstance(thread, threading._DummyThread)


def _lingering(before: set[threading.Thread]) -> list[threading.Thread]:
    deadline = time.monotonic() + LEAK_WAIT
    while True:
        alive = [
            thread
            for thread in threading.enumerate()
            if thread not in before and thread.is_alive() and _ours(thread)
        ]
        if not alive or time.monotonic() > deadline:
            return alive
        alive[0].join(0.05)


@pytest.fixture(autouse=True)
def no_leaked_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a thread it started running (give it LEAK_WAIT seconds to end)."""
    before = set(threading.enumerate())
    if request.node.get_closest_marker("anyio") is not None and inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("no_leaked_tasks")
    yield
    left = _lingering(before)
    assert not left, f"the test left threads running: {', '.join(thread.name for thread in left)}"


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail an async test that leaves tasks running on its event loop."""
    import asyncio

    yield
    current = asyncio.current_task()
    deadline = time.monotonic() + LEAK_WAIT

    def ours(task: asyncio.Task[object]) -> bool:
        # anyio's test runner drives fixtures and tests from tasks of its own.
        return task is not current and not getattr(task.get_coro(), "__qualname__", "").startswith(
            "TestRunner."
        )

    def running() -> list[asyncio.Task[object]]:
        return [task for task in asyncio.all_tasks() if ours(task) and not task.done()]

    while (left := running()) and time.monotonic() < deadline:
        await asyncio.wait(left, timeout=0.05)
    assert not left, f"the test left tasks running: {', '.join(task.get_name() for task in left)}"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: unix socket paths are limited to 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="adp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def plugin_dir(short_tmp: Path) -> Path:
    """The kubelet's device-plugin directory for one test."""
    path = short_tmp / "dp"
    path.mkdir()
    return path


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[KubeletStandIn]:
    """A running kubelet stand-in on ``plugin_dir``."""
    standin = KubeletStandIn(plugin_dir)
    standin.start()
    yield standin
    standin.stop()


@pytest.fixture
def node(short_tmp: Path) -> FakeNode:
    """A fake Atlas 200I A2: one healthy 310B1, its /dev nodes under a fake host root."""
    fake = FakeNode(short_tmp / "node.json", short_tmp / "host")
    fake.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": []}]})
    fake.add_host_paths(
        "/dev/davinci0",
        "/dev/davinci_manager",
        "/dev/davinci_manager_docker",
        "/dev/hisi_hdc",
        "/dev/devmm_svm",
        "/dev/svm0",
        "/dev/vpc",
    )
    return fake


# -- the fake libdcmi.so and the scenario players (tests/fake_dcmi) ---------------------


@pytest.fixture(scope="session")
def fake_dcmi_library() -> Path:
    """The fake libdcmi.so, compiled at most once per content (cached under tests/_build/)."""
    return build_fake_library()


@pytest.fixture
def c_fake(
    request: pytest.FixtureRequest, fake_dcmi_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CFakePlayer]:
    """FakeScenarios played by the C fake, through the real DcmiLibrary binding.

    Parametrize it indirectly with function names to play a driver that lacks them.
    """
    hidden: tuple[str, ...] = getattr(request, "param", ())
    player = CFakePlayer(
        tmp_path / "scenario.txt", build_fake_library(hidden) if hidden else fake_dcmi_library, hidden
    )
    monkeypatch.setenv(SCENARIO_ENV, str(player.scenario_path))
    yield player
    player.close_all()


@pytest.fixture
def python_fake(tmp_path: Path) -> Iterator[PythonFakePlayer]:
    """FakeScenarios played by the pure-Python FakeLibrary."""
    player = PythonFakePlayer(tmp_path / "scenario.json")
    yield player
    player.close_all()


@pytest.fixture(params=["python_fake", "c_fake"])
def any_fake(request: pytest.FixtureRequest) -> ScenarioPlayer[Any]:
    """The same test on both fakes: a node described once behaves the same on each."""
    player: ScenarioPlayer[Any] = request.getfixturevalue(request.param)
    return player


# -- Helm chart (tests/test_chart_*.py) ---------------------------------------------------
# Appended below the shared fixtures; chart_harness loads Helm's 75 MB library only
# when the chart fixture runs, so the rest of the suite never pays for it.
from chart_harness import CHART_DIR, VALUES_FILES, ChartRenderer, Rendering  # noqa: E402


@pytest.fixture(scope="session")
def chart() -> Iterator[ChartRenderer]:
    """The chart, loaded once per session by Helm's own engine."""
    import helm_python as helm

    with helm.Chart.load(CHART_DIR) as loaded:
        yield ChartRenderer(loaded)


@pytest.fixture(scope="session")
def renderings(chart: ChartRenderer) -> dict[str, Rendering]:
    """The defaults and each family values file, rendered once per session, by file name."""
    return {name: chart.render_file(name) for name in VALUES_FILES}


# -- Kubernetes API (the plugin's kube side): a fake API server on loopback -----------------


@pytest.fixture
async def apiserver() -> AsyncIterator[FakeApiServer]:
    """A fake Kubernetes API server on 127.0.0.1, running for one test."""
    async with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(apiserver: FakeApiServer, short_tmp: Path) -> Path:
    """A kubeconfig pointing at ``apiserver`` with its bearer token."""
    return apiserver.write_kubeconfig(short_tmp / "kubeconfig")


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[Kube]:
    """The plugin's real API client (kubernetes-asyncio underneath), connected to ``apiserver``."""
    from ascend_plugin.kubeapi.client import connect

    client = await connect(kubeconfig)
    yield client
    await client.close()


# -- doctor (tests/test_doctor_*.py): fake host roots ----------------------------------------
# Imports of this section stay here, beside what uses them (the file is appended to, never rearranged).
import socket  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

from fake_dcmi.scenario_file import write_scenario  # noqa: E402

from ascend_plugin.doctor.findings import Finding  # noqa: E402
from ascend_plugin.doctor.runner import diagnose  # noqa: E402
from ascend_plugin.settings import Settings  # noqa: E402
from backends.fake import FakeScenario  # noqa: E402


@dataclass
class DoctorRoot:
    """A host file system under a temporary directory, as ``doctor --root`` sees it.

    Built healthy: a 310B board (an Atlas 200I A2) with its six
    host files, dmp_daemon's /dev/shm entries, device nodes and a kubelet (its
    registration and PodResources sockets, bound, not served). Each
    test breaks the one thing it is about. ``backend`` says who plays the chips:
    "python" (the fake backend) or "c" (the real binding over the C fake,
    installed as the board's /usr/lib64/libdcmi.so).
    """

    path: Path
    scenario: Path
    backend: str
    sockets: list[socket.socket] = field(default_factory=list)

    # What doctor checks on a 310B board; a doctor test ties this list to values-310b.yaml.
    HOST_FILES = tuple(item.path for item in ASCEND_310B.host_files)
    DEVICE_NODES = ("/dev/davinci0", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm")
    PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
    LIBRARY = "/usr/lib64/libdcmi.so"
    POD_RESOURCES = str(Settings.model_fields["pod_resources_socket"].default)

    def host(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def add_files(self, *paths: str, content: bytes = b"") -> None:
        for path in paths:
            target = self.host(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)

    def add_directories(self, *paths: str) -> None:
        for path in paths:
            self.host(path).mkdir(parents=True, exist_ok=True)

    def remove(self, path: str) -> None:
        target = self.host(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()

    def add_socket(self, path: str) -> None:
        self.host(path).parent.mkdir(parents=True, exist_ok=True)
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound.bind(str(self.host(path)))
        self.sockets.append(bound)

    def build_healthy(self) -> None:
        self.add_files(*self.HOST_FILES, *self.DEVICE_NODES)
        self.add_directories("/dev/shm/dmp", "/dev/shm/iam", self.PLUGIN_DIR)
        self.add_socket(f"{self.PLUGIN_DIR}/kubelet.sock")
        self.add_socket(self.POD_RESOURCES)
        self.write_scenario(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))

    def write_scenario(self, scenario: FakeScenario) -> None:
        if self.backend == "c":
            write_scenario(self.scenario, scenario)
        else:
            self.scenario.write_text(scenario.model_dump_json(), encoding="utf-8")

    def settings(self, **overrides: Any) -> Settings:
        """Settings as ``doctor`` builds them from flags; no NODE_NAME or kubeconfig unless given."""
        values: dict[str, Any] = {"node_name": "node-1", "host_ip": "192.0.2.10", "kubeconfig": None}
        if self.backend == "c":
            values |= {"dcmi_library": Path(self.LIBRARY), "dcmi_allow_untrusted_library": True}
        else:
            values |= {"backend": "fake", "fake_scenario": self.scenario}
        return Settings(**(values | overrides))

    async def run(self, environ: Mapping[str, str] | None = None, **overrides: Any) -> dict[str, Finding]:
        """Run every check on this root; the findings by name."""
        findings = await diagnose(self.settings(**overrides), self.path, environ or {})
        return {finding.name: finding for finding in findings}

    def close(self) -> None:
        for bound in self.sockets:
            bound.close()


def _doctor_root(
    backend: str, short_tmp: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DoctorRoot]:
    root = DoctorRoot(short_tmp / "host", short_tmp / "scenario", backend)
    if backend == "c":
        root.add_files(DoctorRoot.LIBRARY, content=library.read_bytes())
        monkeypatch.setenv(SCENARIO_ENV, str(root.scenario))
    root.build_healthy()
    yield root
    root.close()


@pytest.fixture(params=["python", "c"])
def doctor_root(
    request: pytest.FixtureRequest, short_tmp: Path, fake_dcmi_library: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DoctorRoot]:
    """A healthy 310B host root, its chips played by each fake in turn."""
    yield from _doctor_root(request.param, short_tmp, fake_dcmi_library, monkeypatch)


@pytest.fixture
def doctor_c_root(
    short_tmp: Path, fake_dcmi_library: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DoctorRoot]:
    """A healthy 310B host root whose /usr/lib64/libdcmi.so is the C fake (the real binding's path)."""
    yield from _doctor_root("c", short_tmp, fake_dcmi_library, monkeypatch)


@pytest.fixture
def doctor_py_root(
    short_tmp: Path, fake_dcmi_library: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DoctorRoot]:
    """A healthy 310B host root with the pure-Python fake backend (for checks that do not load a library)."""
    yield from _doctor_root("python", short_tmp, fake_dcmi_library, monkeypatch)


# -- Volcano mode (tests/test_volcano_*.py): the kubelet's PodResources API --------------------
from pod_resources_standin import PodResourcesStandIn  # noqa: E402


@pytest.fixture
def pod_resources(kubelet: KubeletStandIn, short_tmp: Path) -> Iterator[PodResourcesStandIn]:
    """The kubelet stand-in's PodResources API (v1 and v1alpha1) on its own socket."""
    standin = PodResourcesStandIn(kubelet, short_tmp / "pod-resources" / "kubelet.sock")
    standin.start()
    yield standin
    standin.stop()


# -- DRA (tests/test_dra_*.py): a node for the DRA driver, the DRA kubelet stand-in ---------------
import anyio.to_thread  # noqa: E402
from dra_harness import A2_SERVER, DraNode, make_dra_node, standin  # noqa: E402

from ascend_plugin.app import PluginApp  # noqa: E402
from ascend_plugin.testing.dra_standin import DraKubeletStandIn  # noqa: E402


@pytest.fixture
def dra_node(short_tmp: Path) -> DraNode:
    """An Atlas 800T A2 (eight 910B3) for the DRA driver, its kubelet directories under a short path."""
    return make_dra_node(short_tmp / "dra", A2_SERVER)


@pytest.fixture
async def dra_kubelet(dra_node: DraNode, apiserver: FakeApiServer) -> AsyncIterator[DraKubeletStandIn]:
    """A DRA kubelet stand-in on the node's registry directory, started (it wipes the node's slices first).

    Started and stopped from a worker thread: it talks to ``apiserver``, which answers on the test's loop.
    """
    kubelet = standin(dra_node, apiserver)
    await anyio.to_thread.run_sync(kubelet.start)
    yield kubelet
    await anyio.to_thread.run_sync(kubelet.stop)


@pytest.fixture
async def dra_driver(
    dra_node: DraNode, apiserver: FakeApiServer, kubeconfig: Path, dra_kubelet: DraKubeletStandIn
) -> AsyncIterator[PluginApp]:
    """The plugin serving ``dra_node`` as a DRA driver, registered with ``dra_kubelet``; its Node exists."""
    from dra_harness import NODE, registered, running_driver
    from waiting import until, wait_for

    apiserver.add_node(NODE)
    async with running_driver(dra_node.settings(kubeconfig)) as app:
        await wait_for(dra_kubelet, registered, "the driver registered")
        # The stand-in counts the registration before its NotifyRegistrationStatus reaches the driver.
        await until(
            lambda: app.dra is not None and app.dra.registration.registered,
            "the driver heard it is registered",
        )
        yield app


@pytest.fixture
async def dra_kubelet_for(apiserver: FakeApiServer) -> AsyncIterator[Any]:
    """Start a DRA kubelet stand-in on another DRA node's registry (stopped at the end of the test)."""
    started: list[DraKubeletStandIn] = []

    async def start(node: DraNode) -> DraKubeletStandIn:
        kubelet = standin(node, apiserver)
        await anyio.to_thread.run_sync(kubelet.start)
        started.append(kubelet)
        return kubelet

    yield start
    for kubelet in started:
        await anyio.to_thread.run_sync(kubelet.stop)


# -- hot reset (tests/test_hot_reset_*.py) --------------------------------------------------
from hot_reset_harness import RigParts  # noqa: E402


@pytest.fixture
def reset_parts(
    kubelet: KubeletStandIn,
    apiserver: FakeApiServer,
    kubeconfig: Path,
    pod_resources: PodResourcesStandIn,
    plugin_dir: Path,
    short_tmp: Path,
) -> RigParts:
    """What a plugin with hot reset on runs against (tests/hot_reset_harness.py)."""
    return RigParts(kubelet, apiserver, kubeconfig, pod_resources, plugin_dir, short_tmp)


# Appended: the chip call lanes a test of discovery drives, shut down after it.
from ascend_plugin.chip_calls import ChipCalls  # noqa: E402


@pytest.fixture
def calls() -> Iterator[ChipCalls]:
    chip_calls = ChipCalls(5.0)
    yield chip_calls
    chip_calls.shutdown()


# -- the end-to-end suite on the real Kubernetes (tests/e2e, `nox -s e2e`) ------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kubernetes",
        metavar="VERSION",
        default=None,
        help="run tests/e2e against this release of the real Kubernetes, built from source "
        "(tests/e2e/versions.toml); without it tests/e2e is not collected",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/e2e needs root and the real components: collected only when ``--kubernetes`` is given."""
    if collection_path == Path(__file__).parent / "e2e" and config.getoption("--kubernetes") is None:
        return True
    return None
