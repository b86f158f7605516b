"""kubernetes-asyncio (tens of MB, most of a second) is imported only by the kube side, and only when used.

Each check runs in a fresh interpreter: this test process has long imported it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from plugin_harness import FakeNode
from waiting import WAIT

# Imports every module of both packages except those that talk to the API server
# (the kube, Volcano and DRA faces' and kubeapi's modules; their packages and the
# publisher table stay in),
# and the __main__ entry point, which would run the CLI; reports whether
# kubernetes_asyncio came along.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
names = []
def walk(package):
    # Not pkgutil.walk_packages: it imports every package it recurses into.
    module = importlib.import_module(package)
    names.append(package)
    for info in pkgutil.iter_modules(module.__path__, package + "."):
        kube = info.name.startswith(
            (
                "ascend_plugin.faces.kube.",
                "ascend_plugin.kubeapi.",
                "ascend_plugin.faces.volcano.",
                "ascend_plugin.faces.dra.",
            )
        )
        talks_to_api = kube and not info.name.endswith(".publishers")
        if talks_to_api or info.name.endswith(".__main__"):
            continue
        if info.ispkg:
            walk(info.name)
        else:
            importlib.import_module(info.name)
            names.append(info.name)
walk("ascend_plugin")
walk("backends")
print(json.dumps({"modules": names, "kube": "kubernetes_asyncio" in sys.modules}))
"""

# Runs a plugin on a fake node with a kubelet stand-in until it has registered
# (and, with node_name set, until the kube side started), then reports.
RUN_PLUGIN = """
import json, sys
import anyio
from pathlib import Path
from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from ascend_plugin.settings import Settings

values = json.loads(sys.argv[1])
kubelet = KubeletStandIn(Path(values["device_plugin_path"]))
kubelet.start()

async def main():
    app = PluginApp(Settings(**values))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        with anyio.fail_after(float(sys.argv[2])):
            await app.registered.wait_for_change(0)
            await app.monitor.poll_all()  # the plugin has been busy serving for a while
            while values["node_name"] and "ascend_plugin.faces.kube.publishers" not in sys.modules:
                await anyio.sleep(0.01)
        print(json.dumps({"kube": "kubernetes_asyncio" in sys.modules, "ready": app.ready}))
        app.stop()

anyio.run(main)
kubelet.stop()
"""


def run(script: str, *args: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=WAIT * 2, check=False
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def test_no_module_outside_the_kube_package_imports_kubernetes_asyncio() -> None:
    result = run(IMPORT_ALL)
    modules = result["modules"]
    assert isinstance(modules, list)
    assert {
        "ascend_plugin.app",
        "ascend_plugin.cli",
        "ascend_plugin.testing.kubelet_standin",
        "ascend_plugin.faces.kube.publishers",
        "ascend_plugin.doctor.rbac",
    } <= set(modules)
    assert "ascend_plugin.kubeapi.client" not in modules
    assert result["kube"] is False


def plugin_values(node: FakeNode, plugin_dir: Path, **overrides: object) -> str:
    """The test settings of an in-process plugin, as JSON for the child interpreter."""
    return node.settings(plugin_dir, **overrides).model_dump_json()


def test_a_plugin_without_node_name_never_imports_it(node: FakeNode, plugin_dir: Path) -> None:
    result = run(RUN_PLUGIN, plugin_values(node, plugin_dir), str(WAIT))
    assert result == {"kube": False, "ready": True}


def test_with_node_name_it_is_imported_after_registration(
    node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    # Proves the probe above can see the import: here the kube side starts (and
    # finds no API server on port 1, which changes nothing for the kubelet).
    kubeconfig = short_tmp / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "none", "user": {"token": "t"}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        ),
        encoding="utf-8",
    )
    values = plugin_values(node, plugin_dir, node_name="npu-node-1", kubeconfig=str(kubeconfig))
    result = run(RUN_PLUGIN, values, str(WAIT))
    assert result == {"kube": True, "ready": True}
