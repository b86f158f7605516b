"""A 910 node in Volcano mode: its fake chips, Volcano's pods, and a plugin that follows them.

The plugin runs in-process against the loopback API server (pods, the node)
and the kubelet stand-in with its PodResources API; a test binds pods the way
Volcano does (:func:`volcano_pod`) and admits them the way the kubelet does
(``PodResourcesStandIn.admit``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fake_apiserver import FakeApiServer
from plugin_harness import FakeNode

from ascend_plugin.app import PluginApp
from ascend_plugin.faces.volcano.chooser import VolcanoChooser
from ascend_plugin.faces.volcano.pod_cache import PodCache
from ascend_plugin.faces.volcano.pods import PREDICATE_TIME
from ascend_plugin.settings import Settings

NODE = "atlas-800t-a2"
NODE_IP = "192.0.2.41"
RESOURCE = "huawei.com/Ascend910"
CHIPS = 8


def chip_id(phy: int) -> str:
    return f"Ascend910-{phy}"


def device_ip(phy: int) -> str:
    return f"29.{phy}.1.{10 + phy}"


def scenario(*, faulty: tuple[int, ...] = (), without_ip: tuple[int, ...] = ()) -> dict[str, Any]:
    """Eight 910B3 chips, one per card, each with a RoCE address unless told otherwise."""
    chips = []
    for phy in range(CHIPS):
        chip: dict[str, Any] = {
            "phy_id": phy,
            "card_id": phy,
            "health": 0,
            "fault_codes": ["80E01801"] if phy in faulty else [],
        }
        if phy not in without_ip:
            chip["device_ip"] = device_ip(phy)
        chips.append(chip)
    return {"chip_name": "910B3", "chips": chips}


def make_node(root: Path) -> FakeNode:
    node = FakeNode(root / "node.json", root / "host")
    node.write(scenario())
    node.add_host_paths(
        *(f"/dev/davinci{phy}" for phy in range(CHIPS)),
        "/dev/davinci_manager",
        "/dev/hisi_hdc",
        "/dev/devmm_svm",
    )
    return node


def add_node_object(apiserver: FakeApiServer) -> None:
    """Our Node, with its InternalIP (the rank table's host_ip)."""
    apiserver.put(
        "nodes",
        {
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": NODE},
                    {"type": "InternalIP", "address": NODE_IP},
                ]
            },
        },
    )


def volcano_settings(
    node: FakeNode, plugin_dir: Path, kubeconfig: Path, socket: Path, **overrides: Any
) -> Settings:
    """A Volcano-mode plugin on ``node``; the Kubernetes publishers off unless asked for."""
    values: dict[str, Any] = {
        "node_name": NODE,
        "kubeconfig": kubeconfig,
        "volcano": True,
        "pod_resources_socket": socket,
        "node_labels": False,
        "device_info_configmap": False,
        "node_events": False,
        "host_ip": "198.51.100.7",
    }
    values.update(overrides)
    return node.settings(plugin_dir, **values)


def volcano_pod(
    name: str,
    chips: list[int] | None,
    predicate_time: str | int | None,
    *,
    request: int | None = None,
    namespace: str = "default",
    phase: str = "Pending",
    node_name: str = NODE,
    extra_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as Volcano binds it: ``chips`` in its huawei.com/Ascend910 annotation, and a predicate-time."""
    count = request if request is not None else len(chips or [])
    annotations = dict(extra_annotations or {})
    if chips is not None:
        annotations[RESOURCE] = ",".join(chip_id(phy) for phy in chips)
    if predicate_time is not None:
        annotations[PREDICATE_TIME] = str(predicate_time)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "nodeName": node_name,
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "training:latest",
                    "resources": {"limits": {RESOURCE: str(count)}, "requests": {RESOURCE: str(count)}},
                }
            ],
        },
        "status": {"phase": phase},
    }


def annotations_of(apiserver: FakeApiServer, name: str, namespace: str = "default") -> dict[str, str]:
    pod = apiserver.get("pods", name, namespace)
    return dict(pod["metadata"].get("annotations", {})) if pod else {}


def rank_table_of(apiserver: FakeApiServer, name: str) -> dict[str, Any] | None:
    value = annotations_of(apiserver, name).get("ascend.kubectl.kubernetes.io/ascend-910-configuration")
    return json.loads(value) if value else None


def pod_cache(app: PluginApp) -> PodCache | None:
    """The Volcano chooser's cache of the node's pods, once the device-plugin face runs."""
    chooser = app.face.chooser if app.face is not None else None
    return chooser.pods if isinstance(chooser, VolcanoChooser) else None


def synced(app: PluginApp) -> bool:
    """The Volcano face follows the node's pods."""
    cache = pod_cache(app)
    return cache is not None and cache.synced
